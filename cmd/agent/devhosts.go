package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/juju/clock"
	"github.com/spf13/cobra"
	"gopkg.in/tomb.v2"

	"github.com/berth-dev/berth/environ/runtime"
	"github.com/berth-dev/berth/environ/static"
)

// Defaults of `berth dev-hosts`.
const (
	defaultDevHostCount       = 3
	defaultDevHostSlots       = 4
	defaultDevHostProvisioner = "dev"
	devHostListenAddress      = "127.0.0.1"
)

func newDevHostsCommand(opts *globalOptions) *cobra.Command {
	var (
		cfg   devHostsConfig
		write string
	)
	cmd := &cobra.Command{
		Use:   "dev-hosts [--count N] [--base-port PORT] [--write FILE]",
		Short: "Start local stand-ins for runtime hosts and print a provisioner set of them",
		Long: `Start --count small HTTP servers on 127.0.0.1 that stand in for the runtime hosts of a
static pool, for trying Berth out without real hosts. Each one answers the static
provisioner's health probe (GET ` + static.DefaultHealthPath + `: 200) and shows a short info page at /
(which host it is, how many probes it answered). They run nothing else: a runtime placed on
them is a slot reservation, as with any static pool.

The provisioner set of them (one static provisioner named by --provisioner, --slots slots
per host) goes to --write FILE, replaced at once so a reader never sees half of it, or to
stdout without --write. Logs go to stderr. The hosts run until SIGINT or SIGTERM (Ctrl-C).

With --base-port the hosts listen on consecutive ports from it, so the set stays the same
from one start to the next (the agent's reservations name hosts by URL); without it each
host gets a free port. make run starts them this way beside berth run.`,
		Example: `  # Three hosts on free ports; the provisioner set goes to stdout
  berth dev-hosts

  # Five hosts on 127.0.0.1:9101-9105, their set written to a file, and an agent on them
  berth dev-hosts --count 5 --base-port 9101 --write /tmp/dev-set.json &
  berth run --provisioners /tmp/dev-set.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := opts.newLogger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			logger = logger.With("component", "dev-hosts")
			hosts, err := startDevHosts(cfg, logger, opts.clock)
			if err != nil {
				return err
			}
			set, err := hosts.SetJSON()
			if err == nil {
				if write != "" {
					err = writeFileAtomic(write, set)
				} else {
					_, err = cmd.OutOrStdout().Write(set)
				}
			}
			if err != nil {
				hosts.Kill()
				return errors.Join(err, hosts.Wait())
			}
			if write != "" {
				logger.Info("wrote the provisioner set of the dev hosts", "file", write, "provisioner", cfg.Provisioner)
			}
			logger.Info("dev hosts running until interrupted (Ctrl-C)", "count", cfg.Count)
			select {
			case <-cmd.Context().Done():
			case <-hosts.Dying():
			}
			hosts.Kill()
			err = hosts.Wait()
			logger.Info("dev hosts stopped")
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Count, "count", defaultDevHostCount, "how many hosts to start")
	f.IntVar(&cfg.BasePort, "base-port", 0, "port of the first host, the others follow on the next ports (0: a free port each)")
	f.IntVar(&cfg.Slots, "slots", defaultDevHostSlots, "slots each host offers in the provisioner set")
	f.StringVar(&cfg.Provisioner, "provisioner", defaultDevHostProvisioner, "name of the static provisioner in the set")
	f.StringVar(&write, "write", "", "write the provisioner set to this file instead of stdout")
	return cmd
}

// devHostsConfig says which stand-in hosts to start.
type devHostsConfig struct {
	Count       int    // how many hosts
	BasePort    int    // port of the first host, the others follow; 0: a free port each
	Slots       int    // slots each host offers in the provisioner set
	Provisioner string // name of the static provisioner in the set
}

// Validate names the flag to fix.
func (c devHostsConfig) Validate() error {
	switch {
	case c.Count < 1:
		return usageError(fmt.Errorf("--count: must be at least 1, got %d", c.Count))
	case c.BasePort < 0:
		return usageError(fmt.Errorf("--base-port: must be 0 (a free port each) or a port number, got %d", c.BasePort))
	case c.BasePort+c.Count-1 > 65535:
		return usageError(fmt.Errorf("--base-port: %d does not leave room for %d hosts below port 65536: choose a lower port, or 0 for free ports", c.BasePort, c.Count))
	case c.Slots < 1:
		return usageError(fmt.Errorf("--slots: must be at least 1, got %d", c.Slots))
	case c.Slots > runtime.MaxSlots:
		return usageError(fmt.Errorf("--slots: must be at most %d (what a static host may offer), got %d", runtime.MaxSlots, c.Slots))
	case c.Provisioner == "":
		return usageError(fmt.Errorf("--provisioner: must not be empty (e.g. %s)", defaultDevHostProvisioner))
	}
	return nil
}

// devHosts is a running set of stand-in runtime hosts. Its tomb owns one serving goroutine per
// host and one that closes the servers when the tomb is killed.
type devHosts struct {
	tomb  tomb.Tomb
	cfg   devHostsConfig
	hosts []*devHost
}

// devHost is one stand-in host: an HTTP server answering the health probe and an info page.
type devHost struct {
	name    string // host-1, host-2, ...
	url     string // http://127.0.0.1:PORT
	started time.Time
	clock   clock.Clock
	logger  *slog.Logger
	probes  atomic.Int64 // health probes answered
	server  *http.Server
}

// startDevHosts listens on every host's port before serving any, so that an error (a port
// taken) leaves nothing running.
func startDevHosts(cfg devHostsConfig, logger *slog.Logger, clk clock.Clock) (*devHosts, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	listeners := make([]net.Listener, 0, cfg.Count)
	closeAll := func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}
	for i := range cfg.Count {
		port := 0
		if cfg.BasePort != 0 {
			port = cfg.BasePort + i
		}
		addr := net.JoinHostPort(devHostListenAddress, strconv.Itoa(port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("dev host %d of %d cannot listen on %s: %w; free the port, pick another --base-port, or leave --base-port out for free ports",
				i+1, cfg.Count, addr, err)
		}
		listeners = append(listeners, l)
	}
	d := &devHosts{cfg: cfg}
	for i, l := range listeners {
		h := &devHost{
			name:    fmt.Sprintf("host-%d", i+1),
			url:     "http://" + l.Addr().String(),
			started: clk.Now(),
			clock:   clk,
		}
		h.logger = logger.With("host", h.name, "url", h.url)
		h.server = &http.Server{Handler: h.handler(), ReadHeaderTimeout: 10 * time.Second}
		d.hosts = append(d.hosts, h)
		h.logger.Info("dev host listening", "health", h.url+static.DefaultHealthPath)
	}
	// Started first: a tomb refuses Go once every goroutine it tracks has returned, which
	// could happen if every server failed before this one joined.
	d.tomb.Go(func() error {
		<-d.tomb.Dying()
		for _, h := range d.hosts {
			_ = h.server.Close()
		}
		return nil
	})
	for i, h := range d.hosts {
		l := listeners[i]
		d.tomb.Go(func() error {
			if err := h.server.Serve(l); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("dev host %s: %w", h.url, err)
			}
			return nil
		})
	}
	return d, nil
}

// URLs returns the hosts' base URLs in order.
func (d *devHosts) URLs() []string {
	urls := make([]string, len(d.hosts))
	for i, h := range d.hosts {
		urls[i] = h.url
	}
	return urls
}

// SetJSON returns a provisioner set holding one static provisioner of all the hosts.
func (d *devHosts) SetJSON() ([]byte, error) {
	return devHostsSetJSON(d.cfg.Provisioner, d.URLs(), d.cfg.Slots)
}

// devHostsSetJSON is the provisioner set of static provisioner name over hosts, each offering
// slots, probed at the static environ's default health path.
func devHostsSetJSON(name string, hosts []string, slots int) ([]byte, error) {
	type runtime struct {
		Host  string `json:"host"`
		Slots int    `json:"slots"`
	}
	runtimes := make([]runtime, len(hosts))
	for i, h := range hosts {
		runtimes[i] = runtime{Host: h, Slots: slots}
	}
	type provisioner struct {
		Type string `json:"type"`
		Spec any    `json:"spec"`
	}
	set := map[string]provisioner{name: {Type: static.Type, Spec: map[string]any{"runtimes": runtimes}}}
	out, err := json.MarshalIndent(set, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode the dev hosts' provisioner set: %w", err)
	}
	return append(out, '\n'), nil
}

// Kill starts closing every server.
func (d *devHosts) Kill() { d.tomb.Kill(nil) }

// Wait returns once every server is closed, with the first serving error.
func (d *devHosts) Wait() error { return d.tomb.Wait() }

// Dying is closed when the hosts are told to stop or one fails.
func (d *devHosts) Dying() <-chan struct{} { return d.tomb.Dying() }

func (h *devHost) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+static.DefaultHealthPath, func(w http.ResponseWriter, r *http.Request) {
		n := h.probes.Add(1)
		h.logger.Debug("health probe answered", "from", r.RemoteAddr, "probes", n)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"status\":\"ok\",\"host\":%q}\n", h.name)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = infoPage.Execute(w, map[string]any{
			"Name":       h.name,
			"URL":        h.url,
			"HealthPath": static.DefaultHealthPath,
			"Probes":     h.probes.Load(),
			"Up":         h.clock.Now().Sub(h.started).Round(time.Second),
		})
	})
	return mux
}

var infoPage = template.Must(template.New("info").Parse(`<!doctype html>
<title>berth dev host {{.Name}}</title>
<h1>berth dev host {{.Name}}</h1>
<p>A stand-in for a runtime host of a static pool, started by <code>berth dev-hosts</code> at {{.URL}}.
It answers Berth's health probe at <a href="{{.HealthPath}}">{{.HealthPath}}</a> and runs nothing else.</p>
<p>Up {{.Up}}; health probes answered: {{.Probes}}.</p>
`))

// writeFileAtomic replaces path with data in one rename, so a reader sees the old file or
// the whole new one.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("--write: %w", err)
	}
	_, err = tmp.Write(data)
	if closeErr := tmp.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("--write: cannot write the provisioner set to %s: %w", path, err)
	}
	return nil
}
