package domain_test

import (
	"encoding/json"

	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/kubernetes"
	"github.com/berth-dev/berth/environ/runtime"
)

// testTypes is the catalog the Service tests check resources against: the two types Berth
// ships with, defined by the environs that serve them.
var testTypes = func() *environ.Catalog {
	r := environ.NewRegistry()
	unused := func(string, json.RawMessage, environ.Deps) (environ.Environ, error) { return nil, nil }
	r.Register("test", unused, runtime.Type, kubernetes.ClickhouseType)
	return r.Catalog()
}()
