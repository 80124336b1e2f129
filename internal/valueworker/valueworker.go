// Package valueworker provides a worker that does nothing but hold a value for a manifold's
// Output, for inputs (clock, configuration) that need no running loop of their own.
package valueworker

import (
	"fmt"
	"reflect"

	"github.com/juju/worker/v4"
	"gopkg.in/tomb.v2"
)

// Worker holds a value until it is killed.
type Worker struct {
	tomb  tomb.Tomb
	value any
}

// New returns a running worker holding value, which must not be nil.
func New(value any) (*Worker, error) {
	if value == nil {
		return nil, fmt.Errorf("valueworker: nil value")
	}
	w := &Worker{value: value}
	w.tomb.Go(func() error {
		<-w.tomb.Dying()
		return nil
	})
	return w, nil
}

// Kill asks the worker to stop.
func (w *Worker) Kill() { w.tomb.Kill(nil) }

// Wait waits for the worker to stop.
func (w *Worker) Wait() error { return w.tomb.Wait() }

// Output assigns the held value to out, a pointer to a type the value is assignable to.
func Output(in worker.Worker, out any) error {
	w, ok := in.(*Worker)
	if !ok {
		return fmt.Errorf("valueworker: expected *valueworker.Worker, got %T", in)
	}
	outV := reflect.ValueOf(out)
	if outV.Kind() != reflect.Ptr || outV.IsNil() {
		return fmt.Errorf("valueworker: out must be a non-nil pointer, got %T", out)
	}
	target := outV.Elem()
	value := reflect.ValueOf(w.value)
	if !value.Type().AssignableTo(target.Type()) {
		return fmt.Errorf("valueworker: cannot output %T into %s", w.value, target.Type())
	}
	target.Set(value)
	return nil
}
