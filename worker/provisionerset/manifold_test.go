package provisionerset_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4"
	"github.com/juju/worker/v4/dependency"
	dt "github.com/juju/worker/v4/dependency/testing"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/worker/provisionerset"
)

type manifoldSuite struct {
	signals chan os.Signal
	started []provisionerset.Config
}

var _ = gc.Suite(&manifoldSuite{})

func (s *manifoldSuite) SetUpTest(*gc.C) { s.started = nil }

func (s *manifoldSuite) manifold(newWorker func(provisionerset.Config) (worker.Worker, error)) dependency.Manifold {
	s.signals = make(chan os.Signal, 1)
	return provisionerset.Manifold(provisionerset.ManifoldConfig{
		ClockName: "clock",
		Initial:   []byte(v1),
		Origin:    "BERTH_PROVISIONER_SET_JSON",
		Signals:   s.signals,
		Default:   "pool",
		Builder:   registry(),
		Debounce:  debounce,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		NewWorker: newWorker,
	})
}

func (s *manifoldSuite) TestInputs(c *gc.C) {
	c.Check(s.manifold(provisionerset.NewManifoldWorker).Inputs, gc.DeepEquals, []string{"clock"})
}

func (s *manifoldSuite) TestMissingClock(c *gc.C) {
	_, err := s.manifold(provisionerset.NewManifoldWorker).Start(context.Background(), dt.StubGetter(map[string]any{"clock": dependency.ErrMissing}))
	c.Check(errors.Is(err, dependency.ErrMissing), gc.Equals, true)
}

func (s *manifoldSuite) TestPassesItsConfigOn(c *gc.C) {
	clk := testclock.NewClock(time.Now())
	m := s.manifold(func(config provisionerset.Config) (worker.Worker, error) {
		s.started = append(s.started, config)
		return workertest.NewErrorWorker(nil), nil
	})
	w, err := m.Start(context.Background(), dt.StubGetter(map[string]any{"clock": clk}))
	c.Assert(err, gc.IsNil)
	workertest.CleanKill(c, w)
	c.Assert(s.started, gc.HasLen, 1)
	got := s.started[0]
	c.Check(string(got.Initial), gc.Equals, v1)
	c.Check(got.Origin, gc.Equals, "BERTH_PROVISIONER_SET_JSON")
	c.Check(got.Signals, gc.Equals, (<-chan os.Signal)(s.signals))
	c.Check(got.Default, gc.Equals, "pool")
	c.Check(got.Debounce, gc.Equals, debounce)
	c.Check(got.Clock, gc.Equals, clk)
}

func (s *manifoldSuite) TestOutputsTheSource(c *gc.C) {
	m := s.manifold(provisionerset.NewManifoldWorker)
	w, err := m.Start(context.Background(), dt.StubGetter(map[string]any{"clock": testclock.NewClock(time.Now())}))
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	// The consumer declares the interface it uses (worker/environs' SetSource is one).
	var source interface {
		Current() ([]byte, <-chan struct{})
	}
	c.Assert(m.Output(w, &source), gc.IsNil)
	data, _ := source.Current()
	c.Check(string(data), gc.Equals, v1)
	var wrong *int
	c.Check(m.Output(w, &wrong), gc.ErrorMatches, `provisioner-set manifold: cannot output into \*\*int .*`)
	var other interface{ Other() }
	c.Check(m.Output(w, &other), gc.ErrorMatches, `provisioner-set manifold: cannot output into \*interface \{ Other\(\) \} .*`)
	c.Check(m.Output(w, source), gc.ErrorMatches, `provisioner-set manifold: cannot output into \*provisionerset.Worker .*`)
	c.Check(m.Output(workertest.NewErrorWorker(nil), &source), gc.NotNil)
}
