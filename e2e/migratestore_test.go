package e2e_test

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/e2etest"
)

// TestMigrateStoreKeepsQuotasAndAdmissions moves an SQLite install whose agent admitted an
// owner's resources up to its quota to PostgreSQL with the binary: there the quota shows the
// same usage, the owner's policy is the same, and the agent on PostgreSQL keeps the owner's
// next resource waiting for quota, since the copied admissions still count.
func TestMigrateStoreKeepsQuotasAndAdmissions(t *testing.T) {
	lite := newEnvOn(t, e2etest.SQLite, map[string]int{"a": 20})
	lite.berth("quota", "set", "acme", "--provisioner", "pool", "--resources", "3", "--slots", "100")
	lite.berth("owners", "set", "acme", "--weight", "2", "--class", "gold")
	agent := lite.startAgent()
	for _, name := range []string{"held-0", "held-1", "held-2"} {
		lite.create("--name", name, "--owner", "acme", "--arg", "slots=2", "--wait", "--timeout", "60s")
	}
	agent.stop(t)

	pg := onPostgres(t, lite)
	lite.berth("migrate-store", "--to", pg.dbURL)

	if out := pg.berth("quota", "get", "acme"); !strings.Contains(out, "3/3") || !strings.Contains(out, "6/100") {
		t.Errorf("quota get on the copy printed:\n%s\nwant 3/3 resources and 6/100 slots, as admitted on SQLite", out)
	}
	if n := pg.queryInt(`SELECT count(*) FROM owner_policies WHERE owner = 'acme' AND weight = 2 AND class = 'gold'`); n != 1 {
		t.Errorf("acme's policy on the copy: %d rows of weight 2, class gold; want 1", n)
	}
	pg.startAgent()
	id := pg.create("--name", "over", "--owner", "acme", "--arg", "slots=2")
	want := `waiting for quota: owner "acme" on provisioner "pool": 3 of 3 resources, 6 of 100 slots; this resource needs 2 slots`
	pg.eventually("the fourth resource waiting for quota", 60*time.Second, func() (bool, string) {
		r := pg.get(id)
		return r.Reason == "QuotaExceeded" && r.StatusMessage == want, r.Status + " " + r.Reason + ": " + r.StatusMessage
	})
}

// onPostgres is an env on a new, empty PostgreSQL database with the same runtime hosts and
// provisioner set as from.
func onPostgres(t *testing.T, from *env) *env {
	t.Helper()
	names := make([]string, 0, len(from.hosts))
	for name := range from.hosts {
		names = append(names, name)
	}
	sort.Strings(names)
	var runtimes []map[string]any
	for _, name := range names {
		h := from.hosts[name]
		runtimes = append(runtimes, map[string]any{"host": h.url, "slots": h.slots, "data_dir": "/mnt/data"})
	}
	set := map[string]any{"pool": map[string]any{"type": "static", "spec": map[string]any{"runtimes": runtimes}}}
	base := e2etest.NewOn(t, e2etest.Postgres, set)
	return &env{Env: base, t: t, dbURL: base.DatabaseURL, pool: base.Pool, hosts: from.hosts}
}
