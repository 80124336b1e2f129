package kubernetes

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// restConfig builds the client configuration of spec: its kubeconfig file or, without one,
// the pod's own service account, with the spec's rate limits. Errors never quote the
// kubeconfig, nor its server URL beyond scheme, host and port, nor the service account's
// token: all may hold credentials.
func restConfig(spec *Spec) (*rest.Config, error) {
	return restConfigWith(spec, podServiceAccount())
}

// restConfigWith is restConfig with the in-cluster configuration read from sa.
func restConfigWith(spec *Spec, sa serviceAccount) (*rest.Config, error) {
	var cfg *rest.Config
	if spec.KubeconfigPath == "" {
		c, err := sa.restConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig_path is empty, so the pod's own service account is used, but %w", err)
		}
		cfg = c
	} else {
		c, err := kubeconfigRESTConfig(spec.KubeconfigPath)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig_path: %w", err)
		}
		cfg = c
	}
	cfg.QPS = float32(spec.QPS)
	cfg.Burst = spec.Burst
	cfg.UserAgent = "berth"
	return cfg, nil
}

// serviceAccount is where a pod finds its service account's credentials: the files
// Kubernetes mounts into every pod whose service account token is automounted. The API
// server's address is in the environment Kubernetes gives every container
// (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT).
type serviceAccount struct {
	// TokenFile holds the account's token, which the kubelet rotates in place.
	TokenFile string
	// CAFile holds the certificate of the cluster's CA, which signs the API server's.
	CAFile string
}

// podServiceAccount is the service account as Kubernetes mounts it.
func podServiceAccount() serviceAccount {
	return serviceAccount{
		TokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token",
		CAFile:    "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
	}
}

// restConfig is the in-cluster configuration, as rest.InClusterConfig builds it from the
// same files, except that the token is left in its file: the client reads it from there
// and reads it again as the kubelet rotates it, and it is never in the configuration, so
// never in what may be printed of it. Its errors continue a sentence about the service
// account and say how to fix it.
func (sa serviceAccount) restConfig() (*rest.Config, error) {
	const fix = "set kubeconfig_path to a kubeconfig file, or run the agent in a pod whose service account token is mounted (automountServiceAccountToken not false)"
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, fmt.Errorf("the agent is not running in a Kubernetes pod (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not both set): %s", fix)
	}
	for _, f := range []struct{ what, path string }{{"token", sa.TokenFile}, {"CA certificate", sa.CAFile}} {
		err := checkFile(f.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("its %s file %s is missing: %s", f.what, f.path, fix)
		case err != nil:
			return nil, fmt.Errorf("its %s file %s %v: %s", f.what, f.path, err, fix)
		}
	}
	cfg := &rest.Config{
		Host:            "https://" + net.JoinHostPort(host, port),
		BearerTokenFile: sa.TokenFile,
		TLSClientConfig: rest.TLSClientConfig{CAFile: sa.CAFile},
	}
	if err := checkServerURL(cfg.Host); err != nil {
		return nil, fmt.Errorf("the server URL from KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT %w", err)
	}
	return cfg, nil
}

// kubeconfigRESTConfig is the client configuration of the current context of the kubeconfig
// at path, read once and bounded like every file a spec names. The files the context names
// (certificates, keys, a token file) are checked the same way before the client reads them,
// and its server URL is checked by checkServerURL.
func kubeconfigRESTConfig(path string) (*rest.Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v; give the path of a kubeconfig file", path, err)
	}
	unusable := fmt.Errorf("%s is not a usable kubeconfig (details withheld, they may quote credentials); check it with kubectl --kubeconfig %s version", path, path)
	raw, err := clientcmd.Load(data)
	if err != nil {
		return nil, unusable
	}
	// As clientcmd.LoadFromFile does, so that relative paths start at the kubeconfig's directory.
	for _, c := range raw.Clusters {
		c.LocationOfOrigin = path
	}
	for _, a := range raw.AuthInfos {
		a.LocationOfOrigin = path
	}
	for _, c := range raw.Contexts {
		c.LocationOfOrigin = path
	}
	if err := clientcmd.ResolveLocalPaths(raw); err != nil {
		return nil, unusable
	}
	if current, ok := raw.Contexts[raw.CurrentContext]; ok {
		var files [][2]string // kubeconfig field, path
		if cluster, ok := raw.Clusters[current.Cluster]; ok {
			if err := checkServerURL(cluster.Server); err != nil {
				return nil, fmt.Errorf("the server URL of cluster %q in %s %w", current.Cluster, path, err)
			}
			files = append(files, [2]string{"certificate-authority", cluster.CertificateAuthority})
		}
		if user, ok := raw.AuthInfos[current.AuthInfo]; ok {
			files = append(files,
				[2]string{"client-certificate", user.ClientCertificate},
				[2]string{"client-key", user.ClientKey},
				[2]string{"tokenFile", user.TokenFile})
		}
		for _, f := range files {
			if f[1] == "" {
				continue
			}
			if err := checkFile(f[1]); err != nil {
				return nil, fmt.Errorf("the %s file %s that %s names %v: fix the path in the kubeconfig", f[0], f[1], path, err)
			}
		}
	}
	// The loading rules are only where an auth provider writes back a refreshed token.
	access := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, raw.CurrentContext, &clientcmd.ConfigOverrides{}, access).ClientConfig()
	if err != nil {
		return nil, unusable
	}
	return cfg, nil
}

// checkServerURL checks an API server URL the way the client reads it (a URL, or a host:port
// the client puts https:// before) and refuses one that carries credentials or may carry a
// token: user:password@, a query or a fragment. A path (a proxy's prefix) is allowed. Its
// errors continue a sentence about the URL and never quote it: they give its scheme, host and
// port when it parses, and nothing of it when it does not.
func checkServerURL(raw string) error {
	if raw == "" {
		return errors.New("is empty: give the API server's URL, e.g. https://HOST:6443")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		u, err = url.Parse("https://" + raw)
		if err != nil || (u.Path != "" && u.Path != "/") {
			return errors.New("is not a URL Berth can read (not shown: it may hold credentials): write it as https://HOST:PORT, with no user:password@ in it (escape any '/', '#', '%' or space as %XX, or better, give the credentials to the kubeconfig's user)")
		}
	}
	shown := u.Scheme + "://" + u.Host
	switch {
	case u.User != nil:
		return fmt.Errorf("(%s) carries credentials (user:password@, not shown): remove them from the URL and give the kubeconfig's user a token or client certificate instead", shown)
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("(%s) has a query or fragment (not shown: it may hold a token): remove it; credentials belong to the kubeconfig's user", shown)
	}
	return nil
}
