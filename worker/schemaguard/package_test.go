package schemaguard_test

import (
	"testing"

	gc "gopkg.in/check.v1"
)

func TestPackage(t *testing.T) { gc.TestingT(t) }
