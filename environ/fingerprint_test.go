package environ_test

import (
	"strings"
	"testing"

	"github.com/berth-dev/berth/environ"
)

func buildSet(t *testing.T, setJSON, defaultName string) *environ.Set {
	t.Helper()
	set, err := newTestRegistry().NewSet([]byte(setJSON), defaultName, deps())
	if err != nil {
		t.Fatalf("NewSet(%s): %v", setJSON, err)
	}
	t.Cleanup(func() { set.Close() })
	return set
}

func fingerprint(t *testing.T, set *environ.Set, name string) string {
	t.Helper()
	fp, err := set.Fingerprint(name)
	if err != nil {
		t.Fatalf("Fingerprint(%s): %v", name, err)
	}
	if !strings.HasPrefix(fp, "sha256:") || len(fp) != len("sha256:")+64 {
		t.Fatalf("Fingerprint(%s) = %q, want sha256: and 64 hex digits", name, fp)
	}
	return fp
}

func digestOf(t *testing.T, set *environ.Set) string {
	t.Helper()
	d, err := set.Digest()
	if err != nil {
		t.Fatalf("Digest: %v", err)
	}
	return d
}

func TestFingerprintIgnoresLayout(t *testing.T) {
	a := buildSet(t, `{"f": {"type": "fake", "spec": {"Fail": "", "CloseErr": "", "n": 1.50}}, "g": {"type": "fake", "spec": {}}}`, "f")
	b := buildSet(t, `{
		"g": {"spec": {}, "type": "fake"},
		"f": {"spec": {"n": 1.50, "CloseErr": "",   "Fail": ""}, "type": "fake"}
	}`, "f")
	if fingerprint(t, a, "f") != fingerprint(t, b, "f") || digestOf(t, a) != digestOf(t, b) {
		t.Error("the same set laid out differently has another fingerprint or digest")
	}
	if fingerprint(t, a, "f") == fingerprint(t, a, "g") {
		t.Error("two provisioners with different specs share a fingerprint")
	}
	if _, err := a.Fingerprint("missing"); err == nil || !strings.Contains(err.Error(), `"missing" is not in the provisioner set`) {
		t.Errorf("Fingerprint(missing) = %v, want an error naming it", err)
	}
}

func TestFingerprintFollowsTheSpec(t *testing.T) {
	base := buildSet(t, `{"f": {"type": "fake", "spec": {"n": 1}}, "g": {"type": "fake", "spec": {}}}`, "f")
	numberSpelling := buildSet(t, `{"f": {"type": "fake", "spec": {"n": 1.0}}, "g": {"type": "fake", "spec": {}}}`, "f")
	otherDefault := buildSet(t, `{"f": {"type": "fake", "spec": {"n": 1}}, "g": {"type": "fake", "spec": {}}}`, "g")
	if fingerprint(t, base, "f") == fingerprint(t, numberSpelling, "f") {
		t.Error("1 and 1.0 share a fingerprint; numbers are compared as written, so they must not")
	}
	if fingerprint(t, base, "f") != fingerprint(t, otherDefault, "f") {
		t.Error("another default changed a provisioner's fingerprint")
	}
	if digestOf(t, base) == digestOf(t, otherDefault) {
		t.Error("another default left the set's digest alone")
	}
}

// TestFingerprintUsesTheResourceSpec checks that an environ reporting its resource spec (the
// static one leaves out health probing) keeps its fingerprint when only the rest changes,
// while the set's digest still sees the change.
func TestFingerprintUsesTheResourceSpec(t *testing.T) {
	const runtimes = `"runtimes": [{"host": "http://a:9091", "slots": 2}]`
	base := buildSet(t, `{"pool": {"type": "static", "spec": {`+runtimes+`}}}`, "")
	probed := buildSet(t, `{"pool": {"type": "static", "spec": {`+runtimes+`, "health_path": "/ready"}}}`, "")
	bigger := buildSet(t, `{"pool": {"type": "static", "spec": {"runtimes": [{"host": "http://a:9091", "slots": 3}]}}}`, "")
	if fingerprint(t, base, "pool") != fingerprint(t, probed, "pool") {
		t.Error("a health_path change changed the static provisioner's fingerprint")
	}
	if digestOf(t, base) == digestOf(t, probed) {
		t.Error("a health_path change left the set's digest alone")
	}
	if fingerprint(t, base, "pool") == fingerprint(t, bigger, "pool") {
		t.Error("a host's slot change left the fingerprint alone")
	}
}
