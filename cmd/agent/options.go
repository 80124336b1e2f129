package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/berth-dev/berth/domain/store"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/external"
	"github.com/berth-dev/berth/environ/kubernetes"
	"github.com/berth-dev/berth/environ/postgres"
	"github.com/berth-dev/berth/environ/static"
)

// newRegistry registers every provisioner type this build supports.
func newRegistry() *environ.Registry { return newRegistryFor(nil) }

// newRegistryFor is newRegistry whose external provisioner type also serves the resource
// types the external provisioners of setJSON declare: they are known only from the set.
func newRegistryFor(setJSON []byte) *environ.Registry {
	r := environ.NewRegistry()
	r.Register(static.Type, static.New, static.Types...)
	r.Register(kubernetes.Type, kubernetes.New, kubernetes.Types...)
	r.Register(postgres.Type, postgres.New, postgres.Types...)
	registerBenchBrokers(r)
	r.Register(external.Type, external.New, external.DeclaredTypes(setJSON, r.Catalog())...)
	return r
}

// resolvedDatabaseURL returns the database URL from --database-url or BERTH_DATABASE_URL,
// else the URL of the default SQLite file (whose directory it creates).
func (o *globalOptions) resolvedDatabaseURL() (string, error) {
	if url := strings.TrimSpace(o.databaseURL); url != "" {
		return url, nil
	}
	return store.DefaultURL()
}

// provisionerSetJSON returns the provisioner set JSON and where it came from: the file of
// --provisioners, else BERTH_PROVISIONER_SET_JSON.
func (o *globalOptions) provisionerSetJSON() ([]byte, string, error) {
	if o.provisionersFile != "" {
		data, err := os.ReadFile(o.provisionersFile)
		if err != nil {
			return nil, "", fmt.Errorf("--provisioners: cannot read the provisioner set: %w", err)
		}
		return data, "file " + o.provisionersFile, nil
	}
	if v := os.Getenv(envProvisionerSetJSON); strings.TrimSpace(v) != "" {
		return []byte(v), envProvisionerSetJSON, nil
	}
	return nil, "", errors.New("no provisioner set: pass --provisioners FILE or set " + envProvisionerSetJSON +
		` to the JSON, e.g. {"pool": {"type": "static", "spec": {"runtimes": [{"host": "http://HOST:PORT", "slots": 8}]}}}`)
}

// newLogger returns a logger writing to w at --log-level: JSON lines with -o json, text
// otherwise.
func (o *globalOptions) newLogger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	switch strings.ToLower(strings.TrimSpace(o.logLevel)) {
	case "debug":
		level = slog.LevelDebug
	case "info", "":
		level = slog.LevelInfo
	case "warn", "warning":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		return nil, usageError(fmt.Errorf("--log-level: %q is not a log level: use one of debug, info, warn, error", o.logLevel))
	}
	handlerOpts := &slog.HandlerOptions{Level: level}
	if o.output == outputJSON {
		return slog.New(slog.NewJSONHandler(w, handlerOpts)), nil
	}
	return slog.New(slog.NewTextHandler(w, handlerOpts)), nil
}

// outputFormat validates -o/--output.
func (o *globalOptions) outputFormat() (string, error) {
	switch o.output {
	case outputTable, outputJSON, outputYAML:
		return o.output, nil
	default:
		return "", usageError(fmt.Errorf("-o/--output: %q is not an output format: use table, json or yaml", o.output))
	}
}

// openState connects to the database without migrating it. Its errors never show the URL's
// password.
func (o *globalOptions) openState(ctx context.Context) (store.DB, error) {
	url, err := o.resolvedDatabaseURL()
	if err != nil {
		return nil, err
	}
	return store.Open(ctx, url, store.Options{})
}

// needsSchema turns the error of a query against a database without Berth's tables into
// one that says how to create them.
func needsSchema(err error) error {
	if store.MissingSchema(err) {
		return fmt.Errorf("the database has no Berth schema: run `berth migrate` (or start `berth run`): %w", err)
	}
	return err
}

// rewordedError shows msg in place of err's text and still unwraps to err.
type rewordedError struct {
	msg string
	err error
}

func (e *rewordedError) Error() string { return e.msg }
func (e *rewordedError) Unwrap() error { return e.err }
