package environ

import (
	"fmt"
	"strings"

	"github.com/berth-dev/berth/domain"
)

// TypeDef defines a resource type: its name, what it is, the args it takes and how they are
// checked. The environ packages that serve a type declare its TypeDef next to the code that
// reads its args (environ/runtime for runtimes, environ/kubernetes for ClickHouse), and the
// Registry learns which provisioner types serve it when they are registered; the domain only
// stores the name.
type TypeDef struct {
	// Name is the type's name, as the resources table stores it: lower-case letters, digits
	// and dashes.
	Name domain.ResourceType
	// Help says in one line what a resource of the type is.
	Help string
	// Args are the args the type takes, in the order help lists them; none when empty.
	Args []ArgDef
	// Validate checks args strictly (an unknown key or a wrong type is an error) and returns
	// a *domain.FieldError naming the field, e.g. "args.slots", and the fix. Defaults are not
	// written into the args: the environ's decoder fills them when it reads the args.
	Validate func(args map[string]any) error
	// Digest, when set, identifies the definition's content: provisioners that define a
	// type in their specs (and so each build a TypeDef of it) serve one type when their
	// definitions have the same Digest, and conflict otherwise.
	Digest string
}

// ArgDef describes one arg of a resource type, for help and for parsing --arg flags.
type ArgDef struct {
	Name string
	// Help says what the value is and its bounds, e.g. "whole number, 1 to 1000000".
	Help string
	// Default is the value an absent arg means, as help shows it ("" when it has none).
	Default string
	// String keeps a flag's value as the text written ("version=15" is the string "15");
	// otherwise a value that reads as a number or JSON is that ("slots=3" is the number 3).
	String bool
}

// ArgsHelp lists the type's args for help: "slots (whole number, 1 to 1000000; default 1),
// version (string)", or "takes no args".
func (d *TypeDef) ArgsHelp() string {
	if len(d.Args) == 0 {
		return "takes no args"
	}
	parts := make([]string, len(d.Args))
	for i, a := range d.Args {
		detail := a.Help
		if a.Default != "" {
			detail += "; default " + a.Default
		}
		parts[i] = fmt.Sprintf("%s (%s)", a.Name, detail)
	}
	return strings.Join(parts, ", ")
}

// ParseArgFlags turns "key=value" pairs (the CLI's --arg flags) into args of the type and
// checks them with Validate. A value of a String arg is kept as written; any other value is
// a whole number, else JSON when it parses as JSON, else the text, and an unknown key is left
// for Validate to refuse by name.
func (d *TypeDef) ParseArgFlags(pairs []string) (map[string]any, error) {
	args := make(map[string]any, len(pairs))
	for _, pair := range pairs {
		key, value, ok := strings.Cut(pair, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return nil, &domain.FieldError{Field: "--arg", Msg: fmt.Sprintf("%q is not key=value (e.g. --arg slots=2)", pair)}
		}
		if d.stringArg(key) {
			args[key] = value
		} else {
			args[key] = parseArgValue(value)
		}
	}
	if err := d.Validate(args); err != nil {
		return nil, err
	}
	return args, nil
}

func (d *TypeDef) stringArg(key string) bool {
	for _, a := range d.Args {
		if a.Name == key {
			return a.String
		}
	}
	return false
}

// check says what is missing from a TypeDef given to Register.
func (d *TypeDef) check() error {
	switch {
	case d == nil:
		return fmt.Errorf("a resource type definition is nil")
	case d.Name == "" || strings.TrimFunc(string(d.Name), isNameRune) != "":
		return fmt.Errorf("resource type name %q: use lower-case letters, digits and dashes", d.Name)
	case d.Validate == nil:
		return fmt.Errorf("resource type %q has no Validate", d.Name)
	}
	return nil
}

func isNameRune(r rune) bool {
	return (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-'
}
