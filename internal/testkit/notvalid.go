package testkit

import (
	jujuerrors "github.com/juju/errors"
	gc "gopkg.in/check.v1"
)

// CheckNotValid checks that err is of juju/errors' NotValid kind, as every config's Validate
// reports, and that its message names field (a regular expression): tests assert the kind and
// the field, not the whole wording.
func CheckNotValid(c *gc.C, err error, field string) {
	c.Check(jujuerrors.Is(err, jujuerrors.NotValid), gc.Equals, true, gc.Commentf("err = %v, want NotValid", err))
	c.Check(err, gc.ErrorMatches, ".*"+field+".*")
}
