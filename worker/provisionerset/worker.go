package provisionerset

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/juju/clock"
	"github.com/juju/errors"
	"github.com/juju/worker/v4/catacomb"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// SetBuilder builds a provisioner set (*environ.Registry is one).
type SetBuilder interface {
	NewSet(setJSON []byte, defaultName string, deps environ.Deps) (*environ.Set, error)
}

// Config holds what the worker needs: its dependencies, and its Settings.
type Config struct {
	// Signals carries reload requests (SIGHUP); nil when there are none.
	Signals <-chan os.Signal
	Builder SetBuilder
	Clock   clock.Clock
	Logger  *slog.Logger

	Settings
}

// Validate reports the first missing dependency or setting that is not valid (NotValid).
func (c Config) Validate() error {
	switch {
	case c.Builder == nil:
		return errors.NotValidf("provisioner set: nil Builder")
	case c.Clock == nil:
		return errors.NotValidf("provisioner set: nil Clock")
	case c.Logger == nil:
		return errors.NotValidf("provisioner set: nil Logger")
	}
	if err := c.Settings.Validate(); err != nil {
		return fmt.Errorf("provisioner set: %w", err)
	}
	return nil
}

// Worker holds the accepted provisioner set and reloads it on request.
type Worker struct {
	catacomb catacomb.Catacomb
	config   Config

	mu      sync.Mutex
	current []byte
	digest  string
	changed chan struct{}
	reloads int
	lastErr string

	// target is the file config.Path last resolved to, symlinks followed; only the loop
	// uses it.
	target string
}

// NewWorker starts a worker publishing config.Initial.
func NewWorker(config Config) (*Worker, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	if config.Path != "" {
		abs, err := filepath.Abs(config.Path)
		if err != nil {
			return nil, fmt.Errorf("provisioner set file %s: %w", config.Path, err)
		}
		config.Path = abs
	}
	w := &Worker{config: config, changed: make(chan struct{})}
	checked, err := w.check(config.Initial)
	if err != nil {
		return nil, err
	}
	w.current, w.digest = config.Initial, checked.digest
	if err := catacomb.Invoke(catacomb.Plan{Site: &w.catacomb, Work: w.loop}); err != nil {
		return nil, err
	}
	return w, nil
}

// Kill asks the worker to stop.
func (w *Worker) Kill() { w.catacomb.Kill(nil) }

// Wait waits for the worker to stop.
func (w *Worker) Wait() error { return w.catacomb.Wait() }

// Current returns the accepted set's JSON and a channel that is closed once another set
// replaces it; it is the worker's output (see Manifold).
func (w *Worker) Current() ([]byte, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.current, w.changed
}

// Report shows where the set comes from, its digest and the reloads in the engine report.
func (w *Worker) Report() map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	report := map[string]any{"source": w.config.Origin, "digest": w.digest, "reloads": w.reloads}
	if w.lastErr != "" {
		report["last-rejected"] = w.lastErr
	}
	return report
}

func (w *Worker) loop() error {
	var events <-chan fsnotify.Event
	var watchErrs <-chan error
	if w.config.Path != "" {
		watcher, err := w.watch()
		if err != nil {
			w.config.Logger.Warn("cannot watch the provisioner set file for changes: reload it with SIGHUP",
				"source", w.config.Origin, "err", err)
		} else {
			defer watcher.Close()
			events, watchErrs = watcher.Events, watcher.Errors
		}
		w.target, _ = filepath.EvalSymlinks(w.config.Path) // "" if it does not resolve yet
		w.reload("start")
	}
	var debounce clock.Timer
	var quiet <-chan time.Time
	settle := func() {
		if debounce == nil {
			debounce = w.config.Clock.NewTimer(w.config.Debounce)
		} else {
			if !debounce.Stop() {
				select {
				case <-debounce.Chan():
				default:
				}
			}
			debounce.Reset(w.config.Debounce)
		}
		quiet = debounce.Chan()
	}
	for {
		select {
		case <-w.catacomb.Dying():
			if debounce != nil {
				debounce.Stop()
			}
			return w.catacomb.ErrDying()
		case sig := <-w.config.Signals:
			if w.config.Path == "" {
				w.config.Logger.Info("the provisioner set comes from the environment, which cannot change while the agent runs: nothing to reload; use --provisioners FILE to reload a set",
					"source", w.config.Origin, "signal", sig.String())
				continue
			}
			w.reload(sig.String())
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if w.concerns(ev) {
				settle()
			}
		case err, ok := <-watchErrs:
			if !ok {
				watchErrs = nil
				continue
			}
			// Events may have been lost (e.g. the queue overflowed): read the file again.
			w.config.Logger.Warn("watching the provisioner set file", "source", w.config.Origin, "err", err)
			settle()
		case <-quiet:
			quiet = nil
			w.reload("file changed")
		}
	}
}

// watch watches the directory of the set's file, so that a file replaced by a rename is seen.
func (w *Worker) watch() (*fsnotify.Watcher, error) {
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := watcher.Add(filepath.Dir(w.config.Path)); err != nil {
		watcher.Close()
		return nil, err
	}
	return watcher, nil
}

// concerns reports whether ev may have changed the set's file: an event for the file's own
// name, or any event in its directory after which the file resolves to another file. The
// second is how a Kubernetes ConfigMap volume is updated: FILE is a symlink to ..data/FILE
// and ..data a symlink to a timestamped directory; an update writes a new timestamped
// directory, renames a new symlink over ..data and removes the old directory, and FILE
// itself sees no event. The other events of such an update (the new directory made, the
// old one removed) leave the file resolving where it did, so they are not a change.
func (w *Worker) concerns(ev fsnotify.Event) bool {
	own := filepath.Clean(ev.Name) == w.config.Path &&
		(ev.Has(fsnotify.Write) || ev.Has(fsnotify.Create) || ev.Has(fsnotify.Rename) || ev.Has(fsnotify.Remove))
	target, err := filepath.EvalSymlinks(w.config.Path)
	if err != nil {
		// The file is gone (an event of its own says so) or was caught mid-update, resolved
		// through ..data just before the old directory went: the update's later events
		// resolve it again.
		return own
	}
	moved := target != w.target
	w.target = target
	return own || moved
}

// reload reads the set's file and publishes it if it builds and differs from the running set.
func (w *Worker) reload(trigger string) {
	logger := w.config.Logger.With("source", w.config.Origin, "trigger", trigger)
	data, err := os.ReadFile(w.config.Path)
	if err != nil {
		w.reject(logger, fmt.Errorf("cannot read the provisioner set from %s: %w", w.config.Origin, err))
		return
	}
	checked, err := w.check(data)
	if err != nil {
		w.reject(logger, err)
		return
	}
	w.mu.Lock()
	w.lastErr = ""
	if checked.digest == w.digest {
		w.mu.Unlock()
		level := slog.LevelInfo
		if trigger == "start" {
			level = slog.LevelDebug
		}
		logger.Log(context.Background(), level, "provisioner set unchanged: nothing to reload")
		return
	}
	w.current, w.digest = data, checked.digest
	close(w.changed)
	w.changed = make(chan struct{})
	w.reloads++
	w.mu.Unlock()
	logger.Info("provisioner set reloaded: restarting the provisioners with it",
		"provisioners", checked.names, "default", checked.defaultName)
}

func (w *Worker) reject(logger *slog.Logger, err error) {
	w.mu.Lock()
	w.lastErr = err.Error()
	w.mu.Unlock()
	logger.Error("provisioner set rejected: the agent keeps running the previous set", "err", err)
}

// checkedSet is what a successful check learnt about a set.
type checkedSet struct {
	digest      string
	names       []string
	defaultName string
}

// check builds every provisioner of data as berth check-config does, with no database
// behind them, and closes them again. Its errors read as check-config's.
func (w *Worker) check(data []byte) (checkedSet, error) {
	set, err := w.config.Builder.NewSet(data, w.config.Default, environ.Deps{
		Slots:  checkOnly{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Clock:  w.config.Clock,
	})
	if err != nil {
		return checkedSet{}, fmt.Errorf("provisioner set from %s is invalid: %w", w.config.Origin, err)
	}
	defer set.Close()
	digest, err := set.Digest()
	if err != nil {
		return checkedSet{}, fmt.Errorf("provisioner set from %s: %w", w.config.Origin, err)
	}
	return checkedSet{digest: digest, names: set.Names(), defaultName: set.Default}, nil
}

// checkOnly stands in for the slot store while a set is only checked: building a
// provisioner must not touch it.
type checkOnly struct{}

var errCheckOnly = errors.New("the provisioner set is only being checked: a provisioner must not use slot reservations while it is built")

func (checkOnly) ReserveSlots(context.Context, domain.SlotRequest, domain.PickHost) (domain.Reservation, error) {
	return domain.Reservation{}, errCheckOnly
}

func (checkOnly) ReleaseSlots(context.Context, string, string, *domain.Lease) error {
	return errCheckOnly
}

func (checkOnly) ListReservations(context.Context, string) ([]domain.Reservation, error) {
	return nil, errCheckOnly
}
