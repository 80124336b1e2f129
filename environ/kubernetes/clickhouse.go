package kubernetes

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// clickhouseDefinition is the ClickHouse type's definition, in the form a spec's "types"
// takes: its object name prefix, its templates (template_paths keys), its generated
// password Secret, the config it reports (the DSN without the password, and where the
// Secret is) and that it hibernates.
//
//go:embed types/clickhouse/type.json
var clickhouseDefinition []byte

// clickhouseType is the ClickHouse resource type: a single-replica StatefulSet of the spec's
// clickhouse_image, with a Service and a data volume, sized by one slot, and a password kept
// in a Secret of its own. Its definition says all but what only Go does: its args are read
// by the ClickhouseType TypeDef, its image is the spec's, and its sample render must be one
// StatefulSet and a Service.
var clickhouseType = func() resourceType {
	t := builtinType(domain.ResourceTypeClickHouse, clickhouseDefinition, func(args map[string]any) error {
		_, err := DecodeClickhouseArgs(args)
		return err
	}, statefulSets)
	prepare := t.prepare
	t.prepare = func(e *kubeEnviron, args map[string]any, data *TemplateData) error {
		if err := prepare(e, args, data); err != nil {
			return err
		}
		data.Args = nil
		data.Image = e.spec.ClickhouseImage
		return nil
	}
	t.checkSample = checkClickhouseSample
	return t
}()

// passwordBytes is how much randomness a generated password carries (hex-encoded).
const passwordBytes = 24

// generatedSecret makes sure the resource's password Secret exists (ensureSecret) and
// fingerprints the password on the pod template, so that a re-created Secret rolls the
// server onto the new password. ClickHouse has one, and so has a defined type with a
// generated_secret.
func generatedSecret(ctx context.Context, e *kubeEnviron, cs kubernetes.Interface, r *environ.Resource, data TemplateData, userLabels map[string]string) (map[string]string, error) {
	password, err := e.ensureSecret(ctx, cs, r, data, userLabels)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(password))
	return map[string]string{AnnotationSecretChecksum: hex.EncodeToString(sum[:8])}, nil
}

// ensureSecret returns the password kept in the resource's Secret (ClickHouse's, or a
// defined type's generated_secret), creating the Secret with a new random password the
// first time. The password is never regenerated: a later reconcile reads it back. It is
// created (not applied) so that no apply can replace it; it carries the resource's own
// labels (userLabels, under LabelPrefix) too, and a Secret whose labels under LabelPrefix
// differ has them patched (its data is never touched).
func (e *kubeEnviron) ensureSecret(ctx context.Context, cs kubernetes.Interface, r *environ.Resource, data TemplateData, userLabels map[string]string) (string, error) {
	secrets := cs.CoreV1().Secrets(e.spec.Namespace)
	for attempt := 0; attempt < 2; attempt++ {
		s, err := secrets.Get(ctx, data.SecretName, metav1.GetOptions{})
		if err == nil {
			pw, ok := s.Data[data.PasswordKey]
			if !ok || len(pw) == 0 {
				return "", fmt.Errorf("secret %s has no %q key: delete the secret to have a new password generated", data.SecretName, data.PasswordKey)
			}
			if patch, changed := relabelPatch(s.Labels, userLabels); changed {
				if _, err := secrets.Patch(ctx, data.SecretName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
					return "", fmt.Errorf("relabel secret %s: %w", data.SecretName, explainForbidden(err))
				}
			}
			return string(pw), nil
		}
		if !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("get secret %s: %w", data.SecretName, explainForbidden(err))
		}
		raw := make([]byte, passwordBytes)
		if _, err := io.ReadFull(e.random, raw); err != nil {
			return "", fmt.Errorf("generate %s password: %w", r.Type, err)
		}
		pw := hex.EncodeToString(raw)
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name:      data.SecretName,
				Namespace: e.spec.Namespace,
				Labels:    merge(e.labels(r.ID, r.Type), userLabels),
			},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{data.PasswordKey: []byte(pw)},
		}
		_, err = secrets.Create(ctx, secret, metav1.CreateOptions{FieldManager: fieldManager})
		if err == nil {
			e.logger.Info("created password secret", "resource", r.ID, "type", string(r.Type), "secret", data.SecretName)
			return pw, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("create secret %s: %w", data.SecretName, explainForbidden(err))
		}
		// Another reconcile created it first: read theirs.
	}
	return "", fmt.Errorf("secret %s keeps appearing and disappearing; retry", data.SecretName)
}

// relabelPatch is the JSON merge patch that makes the labels under LabelPrefix of an object
// labelled have those of want, and whether there is anything to patch.
func relabelPatch(have, want map[string]string) ([]byte, bool) {
	labels := map[string]any{}
	for k, v := range want {
		if have[k] != v {
			labels[k] = v
		}
	}
	for k := range have {
		if _, keep := want[k]; !keep && strings.HasPrefix(k, LabelPrefix) {
			labels[k] = nil // removed
		}
	}
	if len(labels) == 0 {
		return nil, false
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	return patch, true
}

// checkClickhouseSample checks a ClickHouse render: one StatefulSet, no Deployment, at least
// one Service.
func checkClickhouseSample(_ *kubeEnviron, objects []*unstructured.Unstructured) error {
	if n := countKind(objects, "StatefulSet"); n != 1 {
		return &domain.FieldError{Field: "template_paths." + TemplateClickhouseStatefulSet, Msg: fmt.Sprintf("must render exactly one StatefulSet, rendered %d", n)}
	}
	if countKind(objects, "Deployment") != 0 {
		return &domain.FieldError{Field: "template_paths." + TemplateClickhouseStatefulSet, Msg: "must not render a Deployment: ClickHouse runs as a StatefulSet"}
	}
	if countKind(objects, "Service") == 0 {
		return &domain.FieldError{Field: "template_paths." + TemplateClickhouseService, Msg: "must render a Service: the DSN names it"}
	}
	return nil
}

func countKind(objects []*unstructured.Unstructured, kind string) int {
	n := 0
	for _, obj := range objects {
		if obj.GetKind() == kind {
			n++
		}
	}
	return n
}
