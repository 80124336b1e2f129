package environ_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/environtest"
	"github.com/berth-dev/berth/environ/kubernetes"
	"github.com/berth-dev/berth/environ/runtime"
)

// The registry learns the resource types from the provisioner types that serve them: a type
// two environs serve is listed once, in the order first registered, with both of them.
func TestCatalogListsTheRegisteredTypes(t *testing.T) {
	r := environ.NewRegistry()
	r.Register("static", unusedInit, runtime.Type)
	r.Register("kubernetes", unusedInit, kubernetes.Types...)
	r.Register("fake", unusedInit, environtest.Widget)
	types := r.Catalog()
	if got, want := types.TypeNames(), []domain.ResourceType{"runtime", "clickhouse", "widget"}; !slices.Equal(got, want) {
		t.Errorf("TypeNames = %v, want %v", got, want)
	}
	if got := types.Names(); got != "runtime, clickhouse, widget" {
		t.Errorf("Names = %q", got)
	}
	for typ, want := range map[domain.ResourceType][]string{"runtime": {"static", "kubernetes"}, "clickhouse": {"kubernetes"}, "widget": {"fake"}, "gizmo": nil} {
		if got := types.ServedBy(typ); !slices.Equal(got, want) {
			t.Errorf("ServedBy(%s) = %v, want %v", typ, got, want)
		}
	}
	wantHelp := "" +
		"  runtime      slots (whole number, 1 to 1000000; default 1), version (string)\n" +
		"  clickhouse   takes no args\n" +
		"  widget       size (whole number, 1 to 10; default 1), colour (string)"
	if got := types.Help(); got != wantHelp {
		t.Errorf("Help =\n%s\nwant\n%s", got, wantHelp)
	}
}

// A type's args are checked by its own definition, and every refusal is a field error that
// names the field; a type no environ serves is refused on the field type, naming the served
// ones.
func TestCatalogChecksArgsNamingTheField(t *testing.T) {
	r := environ.NewRegistry()
	r.Register("fake", unusedInit, environtest.Widget)
	types := r.Catalog()
	if err := types.ValidateArgs("widget", map[string]any{"size": 3, "colour": "red"}); err != nil {
		t.Errorf("valid widget args: %v", err)
	}
	expectFieldError(t, types.ValidateArgs("widget", map[string]any{"size": 11}), "args.size", "at most 10")
	expectFieldError(t, types.ValidateArgs("widget", map[string]any{"colour": 7}), "args.colour", "must be a string")
	expectFieldError(t, types.ValidateArgs("widget", map[string]any{"weight": 1}), "args.weight", "known keys: size, colour")
	expectFieldError(t, types.ValidateArgs("gizmo", nil), "type", `"gizmo" is not a resource type: use one of widget`)
	args, err := types.ParseArgFlags("widget", []string{"size=2", "colour=15"})
	if err != nil || args["size"] != int64(2) || args["colour"] != "15" {
		t.Errorf("ParseArgFlags = %#v, %v; want the number 2 and the text 15", args, err)
	}
	_, err = types.ParseArgFlags("gizmo", []string{"size=2"})
	expectFieldError(t, err, "type", "use one of widget")
	var unknown *environ.UnknownTypeError
	if _, err := types.Lookup("gizmo"); !errors.As(err, &unknown) || !slices.Equal(unknown.Served, []domain.ResourceType{"widget"}) {
		t.Errorf("Lookup(gizmo) = %v; want an *UnknownTypeError serving widget", err)
	}
}

// Registering a type wrongly is a programming error, caught when the registry is built.
func TestRegisterRefusesBadTypeDefinitions(t *testing.T) {
	other := *runtime.Type // another definition of the name runtime
	for name, tc := range map[string]struct {
		defs []*environ.TypeDef
		want string
	}{
		"two definitions of one name": {[]*environ.TypeDef{runtime.Type, &other}, `resource type "runtime" is defined twice`},
		"no name":                     {[]*environ.TypeDef{{Validate: runtime.Type.Validate}}, "resource type name"},
		"a name in capitals":          {[]*environ.TypeDef{{Name: "Widget", Validate: runtime.Type.Validate}}, "lower-case"},
		"no validation":               {[]*environ.TypeDef{{Name: "widget"}}, "has no Validate"},
		"nil":                         {[]*environ.TypeDef{nil}, "nil"},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if got := recover(); got == nil || !strings.Contains(got.(string), tc.want) {
					t.Errorf("Register panicked with %v, want %q", got, tc.want)
				}
			}()
			r := environ.NewRegistry()
			r.Register("a", unusedInit, tc.defs[0])
			for _, def := range tc.defs[1:] {
				r.Register("b", unusedInit, def)
			}
		})
	}
}

// A set the registry builds serves each provisioner the catalog's types it supports, and
// tells a type no environ serves.
func TestSetServesTheCatalogsTypes(t *testing.T) {
	r := environ.NewRegistry()
	r.Register("fake", func(string, json.RawMessage, environ.Deps) (environ.Environ, error) {
		return &environtest.Environ{SupportsFn: func(t domain.ResourceType) bool { return t == "widget" }}, nil
	}, environtest.Widget)
	r.Register("static", unusedInit, runtime.Type)
	set, err := r.NewSet([]byte(`{"shop": {"type": "fake", "spec": {}}}`), "", environ.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	env, _, err := set.Get("")
	if err != nil {
		t.Fatal(err)
	}
	if got := set.ServedTypes(env); !slices.Equal(got, []domain.ResourceType{"widget"}) {
		t.Errorf("ServedTypes = %v, want widget alone", got)
	}
	if err := set.CheckType("runtime"); err != nil {
		t.Errorf("CheckType(runtime) = %v; another provisioner type serves it", err)
	}
	var unknown *environ.UnknownTypeError
	if err := set.CheckType("gizmo"); !errors.As(err, &unknown) || !strings.Contains(err.Error(), "it serves widget, runtime") {
		t.Errorf("CheckType(gizmo) = %v; want an *UnknownTypeError naming the served types", err)
	}
}
