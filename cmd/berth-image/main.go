// Command berth-image writes Berth's container image from a static berth binary, with no
// container engine: an OCI image layout (for skopeo, crane or any registry client) and a
// tarball for docker load or podman load. make image builds the binary and runs it; the
// image is the one the Dockerfile describes (see internal/ociimage).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/berth-dev/berth/internal/ociimage"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "berth-image: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("berth-image", flag.ContinueOnError)
	var (
		config    ociimage.Config
		created   string
		layoutDir string
		tarFile   string
		tag       string
	)
	fs.StringVar(&config.Binary, "binary", "", "the berth binary, built for Linux with CGO_ENABLED=0 (required)")
	fs.StringVar(&config.Version, "version", "", "the version the binary is stamped with (required)")
	fs.StringVar(&config.Revision, "revision", "unknown", "the commit the binary is built from")
	fs.StringVar(&config.Arch, "arch", runtime.GOARCH, "the binary's GOARCH")
	fs.StringVar(&config.CACertificates, "ca-certificates", ociimage.CACertificatesPath, "PEM bundle of root certificates to put in the image")
	fs.StringVar(&created, "created", "", "the image's creation time, as Unix seconds (default: SOURCE_DATE_EPOCH, else the Unix epoch)")
	fs.StringVar(&layoutDir, "oci-layout", "", "directory to write the OCI image layout to (replaced)")
	fs.StringVar(&tarFile, "tarball", "", "file to write the docker load tarball to")
	fs.StringVar(&tag, "tag", "", "NAME:TAG of the image in the layout and the tarball (default berth:VERSION)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: every input is a flag (see -help)", fs.Args())
	}
	if layoutDir == "" && tarFile == "" {
		return errors.New("nothing to write: give -oci-layout DIR, -tarball FILE or both")
	}
	if created == "" {
		created = os.Getenv("SOURCE_DATE_EPOCH")
	}
	if created != "" {
		secs, err := strconv.ParseInt(created, 10, 64)
		if err != nil {
			return fmt.Errorf("-created (or SOURCE_DATE_EPOCH) %q is not Unix seconds, e.g. $(git log -1 --format=%%ct)", created)
		}
		config.Created = time.Unix(secs, 0)
	}
	if tag == "" {
		tag = "berth:" + config.Version
	}
	img, err := ociimage.Build(config)
	if err != nil {
		return err
	}
	if layoutDir != "" {
		if err := ociimage.WriteLayout(layoutDir, img, tag); err != nil {
			return err
		}
	}
	if tarFile != "" {
		if err := ociimage.WriteTarball(tarFile, img, tag); err != nil {
			return err
		}
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s %s\n", tag, digest)
	return nil
}
