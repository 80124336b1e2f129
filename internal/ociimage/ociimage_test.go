package ociimage_test

import (
	"archive/tar"
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/berth-dev/berth/internal/ociimage"
	"github.com/berth-dev/berth/internal/testkit"
)

// TestMakeImage builds the image as make image does (a static binary stamped with VERSION,
// then cmd/berth-image) and checks what a container runtime reads of it: the config's
// entrypoint, command, user, environment, working directory and labels; the layer's binary
// at the entrypoint's path, the state directory the user's own, /tmp writable; and the
// binary itself, taken out of the layer and run, answering --version with VERSION. The
// tarball holds the same image.
func TestMakeImage(t *testing.T) {
	const (
		version  = "v0.0.0-imagetest"
		revision = "0123456789abcdef0123456789abcdef01234567"
		tag      = "berth:" + version
	)
	root := testkit.ModuleRoot(t)
	out := t.TempDir()
	cmd := exec.Command("make", "-s", "-C", root, "image",
		"VERSION="+version, "REVISION="+revision, "SOURCE_DATE_EPOCH=1700000000",
		"IMAGE_DIR="+out, "IMAGE_TAG="+tag)
	if combined, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, combined)
	}

	index, err := layout.ImageIndexFromPath(filepath.Join(out, "oci"))
	if err != nil {
		t.Fatalf("read the OCI layout: %v", err)
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest.Manifests) != 1 {
		t.Fatalf("the layout holds %d images, want 1", len(manifest.Manifests))
	}
	desc := manifest.Manifests[0]
	if got := desc.Annotations["org.opencontainers.image.ref.name"]; got != tag {
		t.Errorf("the layout names its image %q, want %q", got, tag)
	}
	img, err := index.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	checkConfig(t, cf, version, revision)
	if want := time.Unix(1700000000, 0); !cf.Created.Time.Equal(want) {
		t.Errorf("created %s, want SOURCE_DATE_EPOCH's %s", cf.Created.Time, want)
	}

	files := layerFiles(t, img)
	bin, ok := files[ociimage.BinaryPath]
	switch {
	case !ok:
		t.Fatalf("the layer has no %s; it has %v", ociimage.BinaryPath, keys(files))
	case bin.header.Mode&0o111 == 0 || bin.header.Uid != 0:
		t.Errorf("%s: mode %o owner %d, want executable and root's (the agent cannot change its own binary)", ociimage.BinaryPath, bin.header.Mode, bin.header.Uid)
	}
	if state := files[ociimage.StateDir]; state.header == nil || state.header.Typeflag != tar.TypeDir ||
		state.header.Uid != ociimage.UID || state.header.Gid != ociimage.GID || state.header.Mode != 0o700 {
		t.Errorf("%s in the layer is %+v, want a directory of %d:%d, mode 700", ociimage.StateDir, state.header, ociimage.UID, ociimage.GID)
	}
	if tmp := files["/tmp"]; tmp.header == nil || tmp.header.Typeflag != tar.TypeDir || tmp.header.Mode != 0o1777 {
		t.Errorf("/tmp in the layer is %+v, want a directory of mode 1777", tmp.header)
	}
	if certs := files[ociimage.CACertificatesPath]; len(certs.data) == 0 || !strings.Contains(string(certs.data), "BEGIN CERTIFICATE") {
		t.Errorf("%s in the layer holds no certificate", ociimage.CACertificatesPath)
	}
	if passwd := string(files["/etc/passwd"].data); !strings.Contains(passwd, ":65532:65532:") {
		t.Errorf("/etc/passwd names no user 65532:\n%s", passwd)
	}

	extracted := filepath.Join(t.TempDir(), "berth")
	if err := os.WriteFile(extracted, bin.data, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command(extracted, "--version").Output()
	if err != nil {
		t.Fatalf("the image's berth --version: %v", err)
	}
	if want := "berth " + version + "\n"; string(got) != want {
		t.Errorf("the image's berth --version = %q, want %q", got, want)
	}

	ref, err := name.NewTag(tag)
	if err != nil {
		t.Fatal(err)
	}
	fromTar, err := tarball.ImageFromPath(filepath.Join(out, "berth.tar"), &ref)
	if err != nil {
		t.Fatalf("read the tarball as %s: %v", tag, err)
	}
	// The tarball's manifest is docker save's, so compare what it describes.
	if a, b := configName(t, fromTar), configName(t, img); a != b {
		t.Errorf("the tarball's image config is %s, the layout's %s", a, b)
	}
}

// TestDockerfileMatchesImage: the Dockerfile's final stage sets the same entrypoint,
// command, user, environment, working directory, volume and labels as the image
// cmd/berth-image builds, and builds the binary as make image does.
func TestDockerfileMatchesImage(t *testing.T) {
	df := parseDockerfile(t, filepath.Join(testkit.ModuleRoot(t), "Dockerfile"))
	if df.base != "scratch" {
		t.Errorf("the final stage is FROM %s, want scratch (the base make image uses)", df.base)
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags "-s -w -X main.version=${VERSION}"`} {
		if !strings.Contains(df.build, want) {
			t.Errorf("the Dockerfile's build lacks %s", want)
		}
	}
	// The labels' ${VERSION} and ${REVISION} stand for the build arguments.
	img, err := ociimage.Build(ociimage.Config{
		Binary: writeFile(t, "berth", "binary"), Version: "${VERSION}", Revision: "${REVISION}",
		Arch: "amd64", CACertificates: writeFile(t, "certs.pem", "certs"),
	})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	want := cf.Config
	got := v1.Config{
		Entrypoint: df.entrypoint, Cmd: df.cmd, User: df.user, Env: df.env,
		WorkingDir: df.workdir, Labels: df.labels, Volumes: df.volumes,
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("the Dockerfile's final stage sets\n%s\ncmd/berth-image's image\n%s", g, w)
	}
}

// TestBuildIsReproducible: the same inputs give the same digest, so a rebuild of one commit
// pushes nothing new.
func TestBuildIsReproducible(t *testing.T) {
	config := ociimage.Config{
		Binary: writeFile(t, "berth", "binary"), Version: "v1.0.0", Revision: "abc",
		Arch: "amd64", CACertificates: writeFile(t, "certs.pem", "certs"),
		Created: time.Unix(1700000000, 0),
	}
	first, err := ociimage.Build(config)
	if err != nil {
		t.Fatal(err)
	}
	second, err := ociimage.Build(config)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := digest(t, first), digest(t, second); a != b {
		t.Errorf("two builds of the same inputs: %s and %s", a, b)
	}
	config.Created = config.Created.Add(time.Second)
	later, err := ociimage.Build(config)
	if err != nil {
		t.Fatal(err)
	}
	if digest(t, later) == digest(t, first) {
		t.Error("a build at another time has the same digest: the time is not in the image")
	}
}

// TestConfigValidate: each missing input is named with what to give.
func TestConfigValidate(t *testing.T) {
	full := ociimage.Config{Binary: "b", Version: "v", Revision: "r", Arch: "amd64", CACertificates: "c"}
	for field, clear := range map[string]func(*ociimage.Config){
		"Binary":         func(c *ociimage.Config) { c.Binary = "" },
		"Version":        func(c *ociimage.Config) { c.Version = "" },
		"Revision":       func(c *ociimage.Config) { c.Revision = "" },
		"Arch":           func(c *ociimage.Config) { c.Arch = "" },
		"CACertificates": func(c *ociimage.Config) { c.CACertificates = "" },
	} {
		c := full
		clear(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), field+" is empty") {
			t.Errorf("without %s: %v, want an error naming it", field, err)
		}
	}
	if err := full.Validate(); err != nil {
		t.Errorf("a full config: %v", err)
	}
	if _, err := ociimage.Build(ociimage.Config{Binary: filepath.Join(t.TempDir(), "missing"),
		Version: "v", Revision: "r", Arch: "amd64", CACertificates: "c"}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing binary: %v, want a not-exist error", err)
	}
}

func checkConfig(t *testing.T, cf *v1.ConfigFile, version, revision string) {
	t.Helper()
	c := cf.Config
	if cf.OS != "linux" || cf.Architecture == "" {
		t.Errorf("platform %s/%s, want linux/GOARCH", cf.OS, cf.Architecture)
	}
	if !slices.Equal(c.Entrypoint, []string{"berth"}) || !slices.Equal(c.Cmd, []string{"run"}) {
		t.Errorf("entrypoint %q cmd %q, want [berth] [run]", c.Entrypoint, c.Cmd)
	}
	uid, gid, ok := strings.Cut(c.User, ":")
	if n, err := strconv.Atoi(uid); !ok || err != nil || n == 0 {
		t.Errorf("user %q, want a numeric UID:GID that is not root's", c.User)
	} else if _, err := strconv.Atoi(gid); err != nil {
		t.Errorf("user %q: the group is not numeric", c.User)
	}
	if !slices.Contains(c.Env, "PATH=/usr/local/bin:/usr/bin:/bin") || !slices.Contains(c.Env, "XDG_STATE_HOME=/var/lib") {
		t.Errorf("env %q lacks the PATH to %s or the state directory's XDG_STATE_HOME", c.Env, ociimage.BinaryPath)
	}
	if c.WorkingDir != "/" {
		t.Errorf("working directory %q, want /", c.WorkingDir)
	}
	if _, ok := c.Volumes[ociimage.StateDir]; !ok || len(c.Volumes) != 1 {
		t.Errorf("volumes %v, want %s alone", c.Volumes, ociimage.StateDir)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.title":    "berth",
		"org.opencontainers.image.source":   ociimage.Source,
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": revision,
	} {
		if got := c.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
}

type layerFile struct {
	header *tar.Header
	data   []byte
}

// layerFiles reads every file of img's layers by its absolute path.
func layerFiles(t *testing.T, img v1.Image) map[string]layerFile {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Errorf("%d layers, want 1", len(layers))
	}
	files := map[string]layerFile{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("read the layer: %v", err)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files["/"+strings.TrimSuffix(h.Name, "/")] = layerFile{header: h, data: data}
		}
		rc.Close()
	}
	return files
}

// dockerfile is what the final stage of a Dockerfile sets, and the text of its RUN lines
// (every stage's), with their continuation lines joined.
type dockerfile struct {
	base            string
	entrypoint, cmd []string
	user, workdir   string
	env             []string
	labels          map[string]string
	volumes         map[string]struct{}
	build           string
}

// parseDockerfile reads the instructions the Dockerfile's final stage uses, in the forms
// it uses them: JSON arrays for ENTRYPOINT, CMD and VOLUME, one KEY=VALUE per ENV and
// LABEL (the value optionally double-quoted).
func parseDockerfile(t *testing.T, path string) dockerfile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	var cont strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			cont.WriteString(strings.TrimSuffix(line, `\`) + " ")
			continue
		}
		lines = append(lines, cont.String()+line)
		cont.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	var df dockerfile
	for _, line := range lines {
		instr, args, _ := strings.Cut(line, " ")
		args = strings.TrimSpace(args)
		switch strings.ToUpper(instr) {
		case "FROM":
			base, _, _ := strings.Cut(args, " ")
			df = dockerfile{base: base, build: df.build, labels: map[string]string{}, volumes: map[string]struct{}{}}
		case "RUN":
			df.build += args + "\n"
		case "ENTRYPOINT":
			df.entrypoint = jsonArray(t, line, args)
		case "CMD":
			df.cmd = jsonArray(t, line, args)
		case "VOLUME":
			for _, v := range jsonArray(t, line, args) {
				df.volumes[v] = struct{}{}
			}
		case "USER":
			df.user = args
		case "WORKDIR":
			df.workdir = args
		case "ENV":
			k, v := keyValue(t, line, args)
			df.env = append(df.env, k+"="+v)
		case "LABEL":
			k, v := keyValue(t, line, args)
			df.labels[k] = v
		}
	}
	return df
}

func jsonArray(t *testing.T, line, args string) []string {
	t.Helper()
	var out []string
	if err := json.Unmarshal([]byte(args), &out); err != nil {
		t.Fatalf("Dockerfile: %q: want the JSON array form: %v", line, err)
	}
	return out
}

func keyValue(t *testing.T, line, args string) (string, string) {
	t.Helper()
	k, v, ok := strings.Cut(args, "=")
	if !ok || strings.ContainsAny(k, " \t") {
		t.Fatalf("Dockerfile: %q: want one KEY=VALUE", line)
	}
	if strings.HasPrefix(v, `"`) {
		unq, err := strconv.Unquote(v)
		if err != nil {
			t.Fatalf("Dockerfile: %q: %v", line, err)
		}
		v = unq
	} else if strings.ContainsAny(v, " \t") {
		t.Fatalf("Dockerfile: %q: want one KEY=VALUE", line)
	}
	return k, v
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func digest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func configName(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func keys(m map[string]layerFile) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
