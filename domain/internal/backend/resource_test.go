package backend_test

import (
	"errors"
	"testing"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/internal/backend"
)

func TestDecodeLabels(t *testing.T) {
	for _, tc := range []struct {
		raw        string
		want       map[string]string
		unreadable bool
	}{
		{`{}`, map[string]string{}, false},
		{`{"team": "data", "x": ""}`, map[string]string{"team": "data", "x": ""}, false},
		{`null`, map[string]string{}, false},
		{`{"n": 1}`, nil, true},
		{`[]`, nil, true},
		{``, nil, true},
	} {
		var r domain.Resource
		backend.DecodeLabels(&r, []byte(tc.raw))
		if len(r.Labels) != len(tc.want) || (tc.want != nil) != (r.Labels != nil) {
			t.Errorf("labels %q read %#v; want %#v", tc.raw, r.Labels, tc.want)
		}
		for k, v := range tc.want {
			if r.Labels[k] != v {
				t.Errorf("labels %q read %#v; want %#v", tc.raw, r.Labels, tc.want)
			}
		}
		if got := len(r.Unreadable) == 1 && r.Unreadable[0].Column == "labels"; got != tc.unreadable {
			t.Errorf("labels %q: unreadable %v; want %v", tc.raw, r.Unreadable, tc.unreadable)
		}
	}
}

func TestConflictErrors(t *testing.T) {
	for _, err := range []error{backend.HibernateWhileDeleting("r1"), backend.LabelsWhileDeleting("r1")} {
		if !errors.Is(err, domain.ErrConflict) {
			t.Errorf("%v does not wrap ErrConflict", err)
		}
	}
	if got, want := backend.HibernateWhileDeleting("r1").Error(), "resource r1 is being deleted: it cannot be hibernated or woken"; got != want {
		t.Errorf("HibernateWhileDeleting = %q, want %q", got, want)
	}
}
