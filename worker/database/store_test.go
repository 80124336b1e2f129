package database_test

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"github.com/juju/clock/testclock"
	dt "github.com/juju/worker/v4/dependency/testing"
	"github.com/juju/worker/v4/workertest"
	gc "gopkg.in/check.v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/store"
	"github.com/berth-dev/berth/internal/pgtest"
	"github.com/berth-dev/berth/internal/testkit"
	"github.com/berth-dev/berth/worker/database"
)

// storeSuite runs the worker on the agent's real stores.
type storeSuite struct {
	clock *testclock.Clock
}

var _ = gc.Suite(&storeSuite{})

func (s *storeSuite) SetUpTest(c *gc.C) {
	s.clock = testclock.NewClock(time.Now())
}

func (s *storeSuite) manifold(url string) database.ManifoldConfig {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	return database.ManifoldConfig{
		ClockName: "clock",
		Open: func(ctx context.Context, url string) (database.DB, error) {
			return store.Open(ctx, url, store.Options{Logger: logger})
		},
		Logger:    logger,
		NewWorker: database.NewManifoldWorker,
		Settings: database.Settings{
			URL:            url,
			ConnectTimeout: time.Minute, PingInterval: time.Minute, PingTimeout: time.Minute, MaxPingFailures: 1,
		},
	}
}

// checkServesAMigratedStore starts the manifold on url and reads from the store it outputs,
// which needs the migrated schema.
func (s *storeSuite) checkServesAMigratedStore(c *gc.C, url string) {
	manifold := database.Manifold(s.manifold(url))
	w, err := manifold.Start(context.Background(), dt.StubGetter(map[string]any{"clock": s.clock}))
	c.Assert(err, gc.IsNil)
	defer workertest.CleanKill(c, w)
	var state domain.State
	c.Assert(manifold.Output(w, &state), gc.IsNil)
	resources, err := state.ListResources(context.Background(), domain.ListFilter{})
	c.Assert(err, gc.IsNil)
	c.Check(resources, gc.HasLen, 0)

	// The report names the store, as berth status reads it to check the agent's database
	// is its own.
	id, err := state.(domain.IdentityStore).DatabaseIdentity(context.Background())
	c.Assert(err, gc.IsNil)
	report := w.(interface{ Report() map[string]any }).Report()
	c.Check(report[domain.IdentityReportID], gc.Equals, id.ID)
	c.Check(report[domain.IdentityReportWhere], gc.Equals, id.Where)
}

func (s *storeSuite) TestConnectsToPostgreSQL(c *gc.C) {
	url, drop, err := pgtest.CreateDatabase(context.Background())
	c.Assert(err, gc.IsNil)
	defer drop()
	s.checkServesAMigratedStore(c, url)
}

func (s *storeSuite) TestConnectsToSQLite(c *gc.C) {
	s.checkServesAMigratedStore(c, "sqlite://"+filepath.Join(c.MkDir(), "berth.db"))
}

// On a schema a newer build migrated the worker migrates nothing and serves the store all
// the same: the agent stays registered and answering while the schema guard holds its work.
func (s *storeSuite) TestServesAStoreWhoseSchemaIsNewer(c *gc.C) {
	path := filepath.Join(c.MkDir(), "berth.db")
	st, err := store.Open(context.Background(), "sqlite://"+path, store.Options{})
	c.Assert(err, gc.IsNil)
	c.Assert(st.Migrate(context.Background()), gc.IsNil)
	v, err := st.CheckSchema(context.Background())
	c.Assert(err, gc.IsNil)
	db, err := sql.Open("sqlite", "file:"+path)
	c.Assert(err, gc.IsNil)
	defer db.Close()
	_, err = db.Exec(`INSERT INTO schema_migrations (version) VALUES ($1)`, v.Known+1)
	c.Assert(err, gc.IsNil)
	st.Close()

	s.checkServesAMigratedStore(c, "sqlite://"+path)
	var applied int
	c.Assert(db.QueryRow(`SELECT count(*) FROM schema_migrations WHERE version > $1`, v.Known).Scan(&applied), gc.IsNil)
	c.Check(applied, gc.Equals, 1)
}

// A server that accepts the connection and never answers holds the connect until the worker
// is killed, however long the connect timeout.
func (s *storeSuite) TestKillWhileTheServerNeverAnswers(c *gc.C) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	c.Assert(err, gc.IsNil)
	defer listener.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		conn, err := listener.Accept()
		if err == nil {
			accepted <- conn
		}
	}()

	cfg := s.manifold("postgres://berth@" + listener.Addr().String() + "/berth?sslmode=disable")
	w, err := database.NewWorker(database.Config{
		Open: cfg.Open, Clock: s.clock, Logger: cfg.Logger,
		Settings: database.Settings{
			URL:            cfg.URL,
			ConnectTimeout: time.Hour, PingInterval: time.Minute, PingTimeout: time.Minute, MaxPingFailures: 1,
		},
	})
	c.Assert(err, gc.IsNil)
	var conn net.Conn
	select {
	case conn = <-accepted:
	case <-time.After(testkit.LongWait):
		c.Fatal("the worker never connected to the server")
	}
	defer conn.Close()
	workertest.CheckAlive(c, w)
	workertest.CleanKill(c, w)
}
