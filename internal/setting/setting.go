// Package setting reports a worker setting that is not valid in the words of whoever set
// it. A worker's Settings.Validate names the setting as its struct does ("Concurrency 0
// (must be at least 1)"); the agent's command line says the same check as the flag the user
// passed ("--concurrency must be at least 1, got 0"), so that each check is written once,
// beside the setting, and no caller copies it to get its own wording.
package setting

import (
	"fmt"

	"github.com/juju/errors"
)

// Error is a setting that is not valid: its name, its value and the rule it breaks. It is
// NotValid (errors.Is(err, errors.NotValid)).
type Error struct {
	// Name is the setting as its struct names it: "Interval", "Thresholds.Total", or, once
	// In has named its struct, "Capacity.Thresholds.Total".
	Name string
	// Value is the setting's value; nil when the rule is about its being empty.
	Value any
	rule  string
	refs  []Ref
}

// Ref is a setting a rule names besides the one at fault: by its name, and its value unless
// Value is nil.
type Ref struct {
	Name  string
	Value any
}

// Invalid reports the setting name with value breaking rule, which says what the value
// must be, and why or the fix; rule has a %s for each of refs, in order (and %% for a
// percent sign).
func Invalid(name string, value any, rule string, refs ...Ref) *Error {
	return &Error{Name: name, Value: value, rule: rule, refs: refs}
}

// Error says the setting by its name: "LeaseTTL 5m0s (must exceed ReconcileTimeout 5m0s)
// not valid".
func (e *Error) Error() string {
	refs := make([]any, len(e.refs))
	for i, r := range e.refs {
		refs[i] = r.Name
		if r.Value != nil {
			refs[i] = r.Name + " " + show(r.Value)
		}
	}
	name := e.Name
	if e.Value != nil {
		name += " " + show(e.Value)
	}
	return fmt.Sprintf("%s (%s) %s", name, fmt.Sprintf(e.rule, refs...), errors.NotValid)
}

// Unwrap makes the error NotValid.
func (e *Error) Unwrap() error { return errors.NotValid }

// In names the error's settings as fields of the struct field prefix: "Provisioner" makes
// Concurrency "Provisioner.Concurrency".
func (e *Error) In(prefix string) *Error {
	in := *e
	in.Name = prefix + "." + e.Name
	in.refs = make([]Ref, len(e.refs))
	for i, r := range e.refs {
		in.refs[i] = Ref{Name: prefix + "." + r.Name, Value: r.Value}
	}
	return &in
}

// Says says the error as a command line does, each setting named by flag where flag knows
// it (e.g. "--lease-ttl"): "--concurrency must be at least 1, got 0", "--lease-ttl (5m0s)
// must exceed --reconcile-timeout (5m0s)". A setting flag does not know is named as Error
// names it, a rule's other setting by its value alone.
func (e *Error) Says(flag func(name string) (string, bool)) string {
	refs := make([]any, len(e.refs))
	for i, r := range e.refs {
		name, ok := flag(r.Name)
		switch {
		case ok && r.Value != nil:
			refs[i] = fmt.Sprintf("%s (%s)", name, show(r.Value))
		case ok:
			refs[i] = name
		case r.Value != nil:
			refs[i] = show(r.Value)
		default:
			refs[i] = r.Name
		}
	}
	rule := fmt.Sprintf(e.rule, refs...)
	name, ok := flag(e.Name)
	if !ok {
		name = e.Name
	}
	switch {
	case e.Value == nil:
		return name + " " + rule
	case len(e.refs) > 0:
		return fmt.Sprintf("%s (%s) %s", name, show(e.Value), rule)
	}
	return fmt.Sprintf("%s %s, got %s", name, rule, show(e.Value))
}

// show is a value as a message shows it: a string quoted, so that an empty one shows.
func show(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v)
}
