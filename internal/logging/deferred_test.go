package logging_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/berth-dev/berth/internal/logging"
)

// Lines written through Deferred are those the handler writes itself, attributes, groups and
// their order included.
func TestDeferredWritesWhatItsHandlerWrites(t *testing.T) {
	write := func(logger *slog.Logger) {
		base := logger.With("trace_id", "t1")
		attempt := base.With("id", "r1", "generation", 2)
		attempt.Info("provisioning", "step", 1)
		attempt.WithGroup("broker").With("host", "h1").Info("placed", "slots", 2)
		base.Warn("other", "id", "r2")
		attempt.Debug("hidden")
	}
	for _, json := range []bool{false, true} {
		var direct, deferred bytes.Buffer
		noTime := &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		}}
		handler := func(buf *bytes.Buffer) slog.Handler {
			if json {
				return slog.NewJSONHandler(buf, noTime)
			}
			return slog.NewTextHandler(buf, noTime)
		}
		write(slog.New(handler(&direct)))
		write(slog.New(logging.Deferred(handler(&deferred))))
		if deferred.String() != direct.String() {
			t.Errorf("json %v: deferred wrote\n%s\nwant\n%s", json, deferred.String(), direct.String())
		}
	}
}

// countingHandler counts the WithAttrs calls it is given.
type countingHandler struct {
	slog.Handler
	mu        *sync.Mutex
	withAttrs *int
}

func (h countingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	h.mu.Lock()
	*h.withAttrs++
	h.mu.Unlock()
	return countingHandler{Handler: h.Handler.WithAttrs(attrs), mu: h.mu, withAttrs: h.withAttrs}
}

// A logger that writes nothing never has its handler format its attributes; one that writes
// from many goroutines has them formatted once.
func TestDeferredAppliesAttributesOnceWhenALineIsWritten(t *testing.T) {
	var buf bytes.Buffer
	var n int
	counting := countingHandler{Handler: slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}), mu: &sync.Mutex{}, withAttrs: &n}
	logger := slog.New(logging.Deferred(counting))

	quiet := logger.With("id", "r1")
	quiet.Info("below the level")
	if n != 0 {
		t.Errorf("a logger that wrote nothing had its attributes applied %d times", n)
	}

	loud := logger.With("id", "r2")
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loud.Warn("failed")
		}()
	}
	wg.Wait()
	if n != 1 {
		t.Errorf("a logger that wrote 8 lines had its attributes applied %d times; want once", n)
	}
	if !loud.Handler().Enabled(context.Background(), slog.LevelWarn) || loud.Handler().Enabled(context.Background(), slog.LevelInfo) {
		t.Error("Enabled is not the handler's")
	}
}
