package domain

import jujuerrors "github.com/juju/errors"

// FieldError names the field of args or config that is wrong and says how to fix it.
type FieldError struct {
	Field string // e.g. "args.slots"
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Is makes a FieldError of juju/errors' NotValid kind: errors.Is(err, errors.NotValid).
func (e *FieldError) Is(target error) bool { return target == jujuerrors.NotValid }
