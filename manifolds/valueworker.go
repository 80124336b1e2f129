package manifolds

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/catacomb"
	"github.com/juju/worker/v4/dependency"
)

// valueWorker holds a value for its manifold's Output (the clock), or keeps something
// registered (the resources tracked for berth_resources), until the engine kills it.
// juju/worker v4 offers no such worker (Juju keeps its own value worker in its agent's
// engine package, beside the engine's configuration), so this is its one home; it runs on
// a catacomb like the agent's other workers.
type valueWorker struct {
	catacomb catacomb.Catacomb
	value    any
	release  func()
}

// newValueWorker returns a running worker holding value (nil: none, the worker has no
// output) that calls release (nil: nothing to release) once it is killed.
func newValueWorker(value any, release func()) (*valueWorker, error) {
	w := &valueWorker{value: value, release: release}
	if err := catacomb.Invoke(catacomb.Plan{Site: &w.catacomb, Work: w.loop}); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *valueWorker) loop() error {
	<-w.catacomb.Dying()
	if w.release != nil {
		w.release()
	}
	return w.catacomb.ErrDying()
}

// Kill asks the worker to stop.
func (w *valueWorker) Kill() { w.catacomb.Kill(nil) }

// Wait waits for the worker to stop.
func (w *valueWorker) Wait() error { return w.catacomb.Wait() }

// valueManifold is a manifold without inputs whose output is value.
func valueManifold(value any) dependency.Manifold {
	return dependency.Manifold{
		Start: func(context.Context, dependency.Getter) (worker.Worker, error) {
			return newValueWorker(value, nil)
		},
		Output: valueOutput,
	}
}

// valueOutput assigns a valueWorker's value to out, a pointer to a type the value is
// assignable to.
func valueOutput(in worker.Worker, out any) error {
	w, ok := in.(*valueWorker)
	if !ok {
		return fmt.Errorf("value manifold: expected a value worker, got %T", in)
	}
	if w.value == nil {
		return errors.New("value manifold: the worker holds no value")
	}
	target := reflect.ValueOf(out)
	if target.Kind() != reflect.Pointer || target.IsNil() {
		return fmt.Errorf("value manifold: out must be a non-nil pointer, got %T", out)
	}
	value := reflect.ValueOf(w.value)
	if !value.Type().AssignableTo(target.Elem().Type()) {
		return fmt.Errorf("value manifold: cannot output %T into %s", w.value, target.Elem().Type())
	}
	target.Elem().Set(value)
	return nil
}
