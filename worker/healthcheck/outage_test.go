package healthcheck_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/juju/clock/testclock"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/postgres"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/internal/pgtest"
	"github.com/berth-dev/berth/internal/resourcelock"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/healthcheck"
)

// outageSuite runs the health checker on a real PostgreSQL store that it reaches through a
// proxy the test cuts, as a network partition or a database restart cuts an agent off: the
// store's errors are the ones pgx gives for a connection lost and a server that does not
// answer, not errors a fake makes up.
type outageSuite struct {
	ctx    context.Context
	cancel context.CancelFunc
	direct *postgres.State // the test's own view of the database, never cut
	agent  *postgres.State // the worker's, through the proxy
	proxy  *outageProxy
	drop   func()
}

var _ = gc.Suite(&outageSuite{})

func (s *outageSuite) SetUpTest(c *gc.C) {
	s.ctx, s.cancel = context.WithTimeout(context.Background(), time.Minute)
	dbURL, drop, err := pgtest.CreateDatabase(s.ctx)
	c.Assert(err, gc.IsNil)
	s.drop = drop
	s.direct, err = postgres.Open(s.ctx, dbURL, postgres.PoolConfig{})
	c.Assert(err, gc.IsNil)
	c.Assert(s.direct.Migrate(s.ctx), gc.IsNil)
	s.proxy, err = startOutageProxy(dbURL)
	c.Assert(err, gc.IsNil)
	proxied, err := s.proxy.url(dbURL)
	c.Assert(err, gc.IsNil)
	s.agent, err = postgres.Open(s.ctx, proxied, postgres.PoolConfig{MaxConns: 2})
	c.Assert(err, gc.IsNil)
}

func (s *outageSuite) TearDownTest(c *gc.C) {
	if s.agent != nil {
		s.agent.Close()
	}
	if s.proxy != nil {
		s.proxy.close()
	}
	if s.direct != nil {
		s.direct.Close()
	}
	if s.drop != nil {
		s.drop()
	}
	s.cancel()
}

// ready creates a runtime on provisioner pool and records it ready, as an agent would have.
func (s *outageSuite) ready(c *gc.C, name string) domain.Resource {
	r, err := s.direct.CreateResource(s.ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: name, Owner: "acme",
		Provisioner: "pool", Args: map[string]any{"slots": 1}})
	c.Assert(err, gc.IsNil)
	_, err = s.direct.Pool().Exec(s.ctx, `
		UPDATE resources SET status = 'ready', status_message = 'ready', reason = 'Available',
		       observed_generation = generation, ready_at = now()
		 WHERE id = $1`, r.ID)
	c.Assert(err, gc.IsNil)
	return r
}

func (s *outageSuite) repairEvents(c *gc.C, id string) []domain.Event {
	events, err := s.direct.ListEvents(s.ctx, id, 0)
	c.Assert(err, gc.IsNil)
	var repairs []domain.Event
	for _, e := range events {
		if e.Kind == domain.EventRepair {
			repairs = append(repairs, e)
		}
	}
	return repairs
}

// A repair the environ makes while the database is unreachable is kept by the checker and
// recorded in the resource's history once the database answers again, though the next check
// finds nothing left to repair.
func (s *outageSuite) TestRepairMadeWhileTheDatabaseIsUnreachableIsRecordedOnceItIsBack(c *gc.C) {
	r := s.ready(c, "web")
	clk := testclock.NewClock(time.Now())
	env := newFakeEnviron(clk)
	repair := "deployment web re-applied: missing"
	env.errs[r.ID] = fmt.Errorf("deployment was missing")
	env.result[r.ID] = &environ.Resource{ID: r.ID, Repairs: []string{repair}}
	env.block = true
	w, err := healthcheck.NewWorker(healthcheck.Config{
		Store:    s.agent,
		Environs: &fakeEnvirons{envs: map[string]environ.Environ{"pool": env}},
		Clock:    clk,
		Rand:     sequence(0),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Metrics:  newFakeMetrics(),
		Locks:    new(resourcelock.Set),
		Settings: healthcheck.Settings{
			Agent:        domain.AgentIdentity{ID: "agent-a", TTL: 15 * time.Second},
			Interval:     time.Minute,
			Concurrency:  1,
			PageSize:     10,
			CheckTimeout: time.Minute,
		},
	})
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)

	// The round read the row through the proxy; the database goes away while the environ
	// repairs the resource.
	c.Check(env.calls.Next(c).id, gc.Equals, r.ID)
	s.proxy.cut()
	env.gate.Open(c)
	waitReport(c, w.(reporter), map[string]any{"unrecorded-repairs": 1})
	report := w.(reporter).Report()
	c.Check(report["last-record-error"], gc.Not(gc.Equals), nil)
	c.Check(strings.Contains(fmt.Sprint(report["last-record-error"]), r.ID), gc.Equals, true, gc.Commentf("%v", report["last-record-error"]))
	c.Check(s.repairEvents(c, r.ID), gc.HasLen, 0)

	// The database is back and the drift is gone: the next round records the repair.
	s.proxy.restore()
	env.set(func(e *fakeEnviron) {
		e.errs, e.result, e.block = map[string]error{}, map[string]*environ.Resource{}, false
	})
	c.Assert(clk.WaitAdvance(time.Minute, testkit.LongWait, 1), gc.IsNil)
	c.Check(env.calls.Next(c).id, gc.Equals, r.ID)
	var repairs []domain.Event
	testkit.Eventually(c, func() error {
		if repairs = s.repairEvents(c, r.ID); len(repairs) == 0 {
			return fmt.Errorf("no repair event of %s recorded", r.ID)
		}
		return nil
	})
	c.Assert(repairs, gc.HasLen, 1)
	c.Check(repairs[0].Message, gc.Equals, repair)
	c.Check(repairs[0].Status, gc.Equals, domain.StatusReady)
	waitReport(c, w.(reporter), map[string]any{"unrecorded-repairs": nil})
	got, err := s.direct.GetResource(s.ctx, r.ID)
	c.Assert(err, gc.IsNil)
	c.Check(got.Status, gc.Equals, domain.StatusReady)
}

// outageProxy passes TCP connections on to a PostgreSQL server until it is cut: then it
// closes every connection it passes and closes each new one as soon as it is accepted, as
// a server restarting or a partition does, until it is restored.
type outageProxy struct {
	listener        net.Listener
	network, target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// startOutageProxy starts a proxy to the server of dbURL on a loopback port.
func startOutageProxy(dbURL string) (*outageProxy, error) {
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	p := &outageProxy{network: "tcp", target: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), conns: make(map[net.Conn]struct{})}
	if strings.HasPrefix(cfg.Host, "/") {
		p.network, p.target = "unix", filepath.Join(cfg.Host, fmt.Sprintf(".s.PGSQL.%d", cfg.Port))
	}
	if p.listener, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// url is dbURL with the proxy as its server.
func (p *outageProxy) url(dbURL string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil || u.Scheme == "" {
		return "", fmt.Errorf("the test database's URL is not a URL (%v): the proxy needs one", err)
	}
	u.Host = p.listener.Addr().String()
	q := u.Query()
	q.Del("host")
	q.Del("port")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func (p *outageProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.listener.Accept()
		if err != nil {
			return
		}
		if !p.track(client) {
			_ = client.Close()
			continue
		}
		server, err := net.Dial(p.network, p.target)
		if err != nil || !p.track(server) {
			p.forget(client)
			if server != nil {
				_ = server.Close()
			}
			continue
		}
		p.wg.Add(2)
		go p.pipe(client, server)
		go p.pipe(server, client)
	}
}

// track adds conn to the connections a cut closes, unless the proxy is down.
func (p *outageProxy) track(conn net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return false
	}
	p.conns[conn] = struct{}{}
	return true
}

func (p *outageProxy) forget(conn net.Conn) {
	p.mu.Lock()
	delete(p.conns, conn)
	p.mu.Unlock()
	_ = conn.Close()
}

// pipe copies from to to until either ends, then closes both.
func (p *outageProxy) pipe(from, to net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(to, from)
	p.forget(from)
	p.forget(to)
}

// cut closes every connection and refuses new ones until restore.
func (p *outageProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for conn := range p.conns {
		_ = conn.Close()
	}
}

func (p *outageProxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

func (p *outageProxy) close() {
	p.cut()
	_ = p.listener.Close()
	p.wg.Wait()
}
