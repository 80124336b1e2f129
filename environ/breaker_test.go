package environ_test

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

func TestBreakerSettingsPerProvisioner(t *testing.T) {
	set, err := newTestRegistry().NewSet([]byte(`{
		"pool": {"type": "static", "spec": `+staticSpec+`},
		"tuned": {"type": "static", "spec": `+staticSpec+`, "breaker": {"failures": 2, "window": "1m", "open_for": "20s"}},
		"off": {"type": "static", "spec": `+staticSpec+`, "breaker": {"enabled": false}},
	}`), "pool", deps())
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	if s, on := set.Breaker(""); !on || s != domain.DefaultBreakerSettings() {
		t.Errorf("default provisioner without a breaker entry: %+v, %v; want the defaults", s, on)
	}
	want := domain.BreakerSettings{Failures: 2, Window: time.Minute, OpenFor: 20 * time.Second, MaxOpenFor: 5 * time.Minute}
	if s, on := set.Breaker("tuned"); !on || s != want {
		t.Errorf("tuned: %+v, %v; want %+v", s, on, want)
	}
	if _, on := set.Breaker("off"); on {
		t.Error("a breaker with enabled false is on")
	}
	if _, on := set.Breaker("unknown"); !on {
		t.Error("a provisioner the set does not know has no breaker")
	}
	digest := func(breaker string) string {
		s, err := newTestRegistry().NewSet([]byte(`{"pool": {"type": "static", "spec": `+staticSpec+breaker+`}}`), "", deps())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		d, err := s.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if digest("") == digest(`, "breaker": {"failures": 9}`) {
		t.Error("a change of the breaker settings leaves the set's digest as it was: a reload would not apply it")
	}
}

func TestBreakerSettingsErrorsNameTheFieldAndTheFix(t *testing.T) {
	for _, tc := range []struct{ breaker, want string }{
		{`{"failures": 0}`, `provisioner "pool", line 1, column 124: breaker.failures: is 0: give how many failures`},
		{`{"window": "-1s"}`, `breaker.window: is -1s: give a positive duration`},
		{`{"open_for": "1m", "max_open_for": "30s"}`, `breaker.max_open_for: is 30s: give at least open_for (1m0s)`},
		{`{"window": 30}`, `want a duration such as "30s", got 30`},
		{`{"window": "soon"}`, `want a duration such as "30s", got "soon"`},
		{`{"failure": 3}`, `unknown field "failure"`},
	} {
		_, err := newTestRegistry().NewSet([]byte(`{"pool": {"type": "static", "spec": `+staticSpec+`, "breaker": `+tc.breaker+`}}`), "", deps())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("breaker %s: %v; want it to say %q", tc.breaker, err, tc.want)
		}
	}
}
