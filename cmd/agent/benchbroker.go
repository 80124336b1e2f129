//go:build benchbroker

package main

import (
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/sleep"
)

// registerBenchBrokers registers the test brokers the bench measures with (environ/sleep):
// only a binary built with the build tag benchbroker has them.
func registerBenchBrokers(r *environ.Registry) {
	r.Register(sleep.Type, sleep.New, sleep.Types...)
}
