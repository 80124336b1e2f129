package provisioner

import (
	"testing"

	"github.com/juju/errors"
)

// An environ without environ.Hibernator gives a NotSupported error that says how out.
func TestCannotHibernateIsNotSupported(t *testing.T) {
	err := cannotHibernate("pool", "fake", "r1")
	if !errors.Is(err, errors.NotSupported) {
		t.Errorf("cannotHibernate = %v, want NotSupported", err)
	}
	want := `provisioner "pool" (fake) cannot hibernate resources: wake the resource (berth resource wake r1) or delete it`
	if err.Error() != want {
		t.Errorf("cannotHibernate = %q, want %q", err, want)
	}
}
