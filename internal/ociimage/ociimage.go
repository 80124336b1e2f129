// Package ociimage builds Berth's container image without a container engine: one layer,
// on no base, holding the static binary and the few files it needs, with the same entrypoint,
// command, user, environment, working directory and labels as the repository's Dockerfile
// (its test holds the two to each other). make image writes it as an OCI image layout and
// as a tarball that docker load and podman load take.
//
// The image is reproducible: every file in the layer has the same time (Config.Created, the
// commit's time under make image), so the same binary gives the same digest.
package ociimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's layout and runtime settings. The Dockerfile spells out the same values.
const (
	// BinaryPath is where the berth binary lies; Entrypoint names it through PATH.
	BinaryPath = "/usr/local/bin/berth"
	// StateDir holds the embedded SQLite store when no database URL is given (XDG_STATE_HOME
	// is its parent, so the agent's default file is StateDir/berth.db); it is the image's
	// one volume and belongs to the agent's user.
	StateDir = "/var/lib/berth"
	// CACertificatesPath is where Go's TLS looks for the root certificates on Linux, for
	// PostgreSQL with sslmode=verify-full and the Kubernetes API outside the cluster.
	CACertificatesPath = "/etc/ssl/certs/ca-certificates.crt"
	// UID and GID are the agent's user and group: not root, and numeric so that Kubernetes'
	// runAsNonRoot can check it without reading the image's /etc/passwd.
	UID = 65532
	GID = 65532
	// User is the image's USER.
	User = "65532:65532"
	// WorkingDir is the image's WORKDIR.
	WorkingDir = "/"
	// Source is the repository the image is built from (its source label).
	Source = "https://github.com/berth-dev/berth"
)

// Entrypoint and Cmd make `docker run IMAGE` start the agent and `docker run IMAGE version`
// any other subcommand.
var (
	Entrypoint = []string{"berth"}
	Cmd        = []string{"run"}
	// Env puts the binary on PATH and the embedded store under StateDir.
	Env = []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"XDG_STATE_HOME=" + path.Dir(StateDir),
	}
)

// Config says what goes into the image.
type Config struct {
	// Binary is the file of a static berth binary for Linux on Arch (CGO_ENABLED=0).
	Binary string
	// Version is the release the binary is stamped with (its version label).
	Version string
	// Revision is the commit the binary was built from (its revision label).
	Revision string
	// Arch is the binary's GOARCH (the image's architecture).
	Arch string
	// CACertificates is the PEM file copied to CACertificatesPath.
	CACertificates string
	// Created is the image's creation time and every file's time in its layer, to the
	// second; the zero time stands for the Unix epoch.
	Created time.Time
}

// Validate says which field is missing.
func (c Config) Validate() error {
	switch {
	case c.Binary == "":
		return errors.New("ociimage: Binary is empty: give the berth binary built for Linux with CGO_ENABLED=0")
	case c.Version == "":
		return errors.New("ociimage: Version is empty: give the version the binary is stamped with (-X main.version)")
	case c.Revision == "":
		return errors.New("ociimage: Revision is empty: give the commit the binary is built from")
	case c.Arch == "":
		return errors.New("ociimage: Arch is empty: give the binary's GOARCH, e.g. amd64")
	case c.CACertificates == "":
		return errors.New("ociimage: CACertificates is empty: give a PEM bundle of root certificates, e.g. " + CACertificatesPath)
	}
	return nil
}

// Labels are the image's OCI annotations for a build of version at revision. There is no
// licenses label: the repository names no licence yet.
func Labels(version, revision string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "berth",
		"org.opencontainers.image.description": "Berth's control-plane agent and CLI",
		"org.opencontainers.image.source":      Source,
		"org.opencontainers.image.url":         Source,
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.revision":    revision,
	}
}

// Build makes the image config describes.
func Build(config Config) (v1.Image, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	binary, err := os.ReadFile(config.Binary)
	if err != nil {
		return nil, fmt.Errorf("read the berth binary: %w", err)
	}
	certs, err := os.ReadFile(config.CACertificates)
	if err != nil {
		return nil, fmt.Errorf("read the root certificates (on Debian: apt-get install ca-certificates): %w", err)
	}
	created := config.Created.Truncate(time.Second).UTC()
	if config.Created.IsZero() {
		created = time.Unix(0, 0).UTC()
	}
	rootfs, err := rootFS(binary, certs, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(rootfs)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("make the image's layer: %w", err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Author:    Source,
			Created:   v1.Time{Time: created},
			CreatedBy: "berth-image: " + BinaryPath + " " + config.Version,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("add the layer to the image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = config.Arch
	cf.Created = v1.Time{Time: created}
	cf.Config = v1.Config{
		Entrypoint: Entrypoint,
		Cmd:        Cmd,
		User:       User,
		Env:        Env,
		WorkingDir: WorkingDir,
		Labels:     Labels(config.Version, config.Revision),
		Volumes:    map[string]struct{}{StateDir: {}},
	}
	return mutate.ConfigFile(img, cf)
}

// WriteLayout writes img as the only image of a new OCI image layout in dir (replacing
// what dir held), named by ref, e.g. berth:v1.2.0.
func WriteLayout(dir string, img v1.Image, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clear the image layout %s: %w", dir, err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write the image layout %s: %w", dir, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref,
	})); err != nil {
		return fmt.Errorf("write the image to the layout %s: %w", dir, err)
	}
	return nil
}

// WriteTarball writes img as a tarball in the format of docker save, tagged ref, for docker
// load or podman load.
func WriteTarball(file string, img v1.Image, ref string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image tag %q: %w (give NAME:TAG, e.g. berth:v1.2.0)", ref, err)
	}
	if err := tarball.WriteToFile(file, tag, img); err != nil {
		return fmt.Errorf("write the image tarball %s: %w", file, err)
	}
	return nil
}

// rootFS is the layer's tar: the binary, the root certificates, the agent's user in
// /etc/passwd and /etc/group (so that tools show a name), a /tmp for SQLite's temporary files
// (mount a tmpfs there when the root file system is read-only) and the state directory.
func rootFS(binary, certs []byte, mtime time.Time) ([]byte, error) {
	const (
		passwd = "root:x:0:0:root:/root:/sbin/nologin\nberth:x:65532:65532:berth:" + StateDir + ":/sbin/nologin\n"
		group  = "root:x:0:\nberth:x:65532:\n"
	)
	type entry struct {
		name     string
		mode     int64
		uid, gid int
		data     []byte // nil for a directory
	}
	entries := []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: CACertificatesPath[1:], mode: 0o644, data: certs},
		{name: "tmp/", mode: 0o1777},
		{name: "usr/", mode: 0o755},
		{name: "usr/local/", mode: 0o755},
		{name: "usr/local/bin/", mode: 0o755},
		{name: BinaryPath[1:], mode: 0o755, data: binary},
		{name: "var/", mode: 0o755},
		{name: "var/lib/", mode: 0o755},
		{name: StateDir[1:] + "/", mode: 0o700, uid: UID, gid: GID},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: mtime,
		}
		if e.data == nil {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
