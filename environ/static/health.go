package static

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/juju/clock"
)

// HTTPDoer sends the health probes; *http.Client is one.
type HTTPDoer interface {
	Do(req *http.Request) (*http.Response, error)
}

// probeCacheTTL is how long a host's probe result answers for it: with many resources on few
// hosts, a check round probes each host about once per TTL instead of once per resource.
const probeCacheTTL = 10 * time.Second

// hostHealth probes the pool's hosts and remembers each host's latest result. A host whose
// latest probe failed is down: placement avoids it until a probe succeeds. A host never
// probed is not known to be up, so placement probes it first (probeUnprobed) and takes it
// only once it has answered. Probes of one host are never concurrent: callers arriving while
// one is in flight wait for its result.
type hostHealth struct {
	client  HTTPDoer
	clock   clock.Clock
	path    string // "" turns probing off
	timeout time.Duration

	mu    sync.Mutex
	hosts map[string]*probeState
}

type probeState struct {
	at       time.Time     // when the latest result was taken; zero: never
	err      error         // the latest result
	inflight chan struct{} // closed when the probe in flight ends; nil when none is
}

func newHostHealth(client HTTPDoer, clk clock.Clock, path string, timeout time.Duration) *hostHealth {
	return &hostHealth{client: client, clock: clk, path: path, timeout: timeout, hosts: make(map[string]*probeState)}
}

// probe returns host's health: a result younger than probeCacheTTL, or a new probe's.
func (h *hostHealth) probe(ctx context.Context, host string) error {
	if h.path == "" {
		return nil
	}
	for {
		h.mu.Lock()
		st, ok := h.hosts[host]
		if !ok {
			st = &probeState{}
			h.hosts[host] = st
		}
		if !st.at.IsZero() && h.clock.Now().Sub(st.at) < probeCacheTTL {
			err := st.err
			h.mu.Unlock()
			return err
		}
		if wait := st.inflight; wait != nil {
			h.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		done := make(chan struct{})
		st.inflight = done
		h.mu.Unlock()

		err := h.get(ctx, host)
		h.mu.Lock()
		st.inflight = nil
		if ctx.Err() == nil || err == nil {
			// A probe cut short by the caller says nothing about the host.
			st.at, st.err = h.clock.Now(), err
		}
		h.mu.Unlock()
		close(done)
		return err
	}
}

// probeAll probes every host at once and returns the failures by host.
func (h *hostHealth) probeAll(ctx context.Context, hosts []string) map[string]error {
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for i, host := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = h.probe(ctx, host)
		}()
	}
	wg.Wait()
	failed := make(map[string]error)
	for i, err := range errs {
		if err != nil {
			failed[hosts[i]] = err
		}
	}
	return failed
}

// probeUnprobed probes, all at once, the hosts of hosts that have no result yet (none has
// been probed, or every probe of it was cut short by its caller). Each probe is bounded by
// the probe timeout on the environ's clock, and ctx ends them all; when it has, its error is
// returned and the hosts it cut short stay unprobed.
func (h *hostHealth) probeUnprobed(ctx context.Context, hosts []string) error {
	if h.path == "" {
		return nil
	}
	var unprobed []string
	h.mu.Lock()
	for _, host := range hosts {
		if st, ok := h.hosts[host]; !ok || st.at.IsZero() {
			unprobed = append(unprobed, host)
		}
	}
	h.mu.Unlock()
	if len(unprobed) == 0 {
		return nil
	}
	h.probeAll(ctx, unprobed)
	return ctx.Err()
}

// stale returns the hosts of hosts, in the order given, without a result younger than the
// probe cache.
func (h *hostHealth) stale(hosts []string) []string {
	now := h.clock.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, host := range hosts {
		if st, ok := h.hosts[host]; !ok || st.at.IsZero() || now.Sub(st.at) >= probeCacheTTL {
			out = append(out, host)
		}
	}
	return out
}

// notRecentlyUp returns the hosts of hosts, in the order given, that are not known to be up
// by a result younger than the probe cache. With probing off every host is up.
func (h *hostHealth) notRecentlyUp(hosts []string) []string {
	if h.path == "" {
		return nil
	}
	stale := h.stale(hosts)
	out := h.notUp(hosts)
	for _, host := range stale {
		if !slices.Contains(out, host) {
			out = append(out, host)
		}
	}
	return out
}

// notUp returns the hosts of hosts that are not known to be up, in the order given: those
// whose latest probe failed and those without a result. With probing off every host is up.
func (h *hostHealth) notUp(hosts []string) []string {
	if h.path == "" {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, host := range hosts {
		if st, ok := h.hosts[host]; !ok || st.at.IsZero() || st.err != nil {
			out = append(out, host)
		}
	}
	return out
}

// down returns the hosts whose latest probe failed, sorted.
func (h *hostHealth) down() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for host, st := range h.hosts {
		if !st.at.IsZero() && st.err != nil {
			out = append(out, host)
		}
	}
	sort.Strings(out)
	return out
}

// get sends one GET host+path bounded by the timeout on the environ's clock; any 2xx answer is
// healthy.
func (h *hostHealth) get(ctx context.Context, host string) error {
	ctx, cancel := context.WithCancelCause(ctx)
	timer := h.clock.AfterFunc(h.timeout, func() {
		cancel(fmt.Errorf("no answer within %s", h.timeout))
	})
	defer func() {
		timer.Stop()
		cancel(context.Canceled)
	}()
	url := host + h.path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("health probe GET %s: %w", url, err)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
			return fmt.Errorf("health probe GET %s: %w", url, cause)
		}
		return fmt.Errorf("health probe GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("health probe GET %s: answered %s", url, resp.Status)
	}
	return nil
}
