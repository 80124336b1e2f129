package environtest

import (
	"fmt"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// SupportedTypes are the resource types an Environ without SupportsFn supports: the two
// Berth ships with, and Widget.
var SupportedTypes = []domain.ResourceType{domain.ResourceTypeRuntime, domain.ResourceTypeClickHouse, WidgetName}

// WidgetName is the name of Widget.
const WidgetName domain.ResourceType = "widget"

// MaxWidgetSize bounds a widget's size arg.
const MaxWidgetSize = 10

// Widget is a resource type made up for tests, which no environ of Berth serves: a test
// registers it with a fake environ to show that a type is added by the environ that serves
// it, with nothing in the domain, the schema or the CLI to change.
var Widget = &environ.TypeDef{
	Name: WidgetName,
	Help: "a made-up resource for tests",
	Args: []environ.ArgDef{
		{Name: "size", Help: fmt.Sprintf("whole number, 1 to %d", MaxWidgetSize), Default: "1"},
		{Name: "colour", Help: "string", String: true},
	},
	Validate: func(args map[string]any) error {
		if err := environ.OnlyKeys("args", args, "size", "colour"); err != nil {
			return err
		}
		if v, ok := args["size"]; ok {
			if _, err := environ.WholeNumber("args.size", v, 1, MaxWidgetSize); err != nil {
				return err
			}
		}
		if v, ok := args["colour"]; ok {
			if _, isString := v.(string); !isString {
				return &domain.FieldError{Field: "args.colour", Msg: fmt.Sprintf("must be a string, got %s", environ.Describe(v))}
			}
		}
		return nil
	},
}
