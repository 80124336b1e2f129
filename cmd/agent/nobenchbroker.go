//go:build !benchbroker

package main

import "github.com/berth-dev/berth/environ"

// registerBenchBrokers registers nothing: the test brokers are built only into the bench's
// agent (build tag benchbroker).
func registerBenchBrokers(*environ.Registry) {}
