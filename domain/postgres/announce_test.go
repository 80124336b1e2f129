package postgres_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/postgres"
	"github.com/berth-dev/berth/internal/pgtest"
)

func listenAnnounced(t *testing.T, st *postgres.State) domain.ChangeAnnouncer {
	t.Helper()
	l, err := st.ListenAnnouncedChanges(testContext(t))
	if err != nil {
		t.Fatalf("listen for announced changes: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// nextWakeUp waits for the listener's next wake-up and returns what it announced.
func nextWakeUp(t *testing.T, l domain.ChangeAnnouncer) (domain.Change, bool) {
	t.Helper()
	change, announced, err := l.WaitAnnounced(testContext(t))
	if err != nil {
		t.Fatalf("wait for a wake-up: %v", err)
	}
	return change, announced
}

// A resource created alone by plain SQL is announced with its change-log entry and its row,
// before the bare wake-up, and the row kept is the row a read gives, whatever the inserting
// session's time zone.
func TestAResourceCreatedAloneIsAnnouncedWithItsRow(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	l := listenAnnounced(t, st)
	var id string
	err := pgx.BeginFunc(ctx, st.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL TimeZone = 'Asia/Kolkata'`); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `
			INSERT INTO resources (type, name, owner, provisioner, args, labels, paused, hibernate, retry_requested_at)
			VALUES ('runtime', 'web', 'team-a', 'pool', '{"slots": 2, "env": {"MODE": "é \"quoted\""}, "ports": [80, 443], "big": 12345678901}',
			        '{"tier": "web"}', true, true, now() - interval '1 hour')
			RETURNING id::text`).Scan(&id)
	})
	if err != nil {
		t.Fatalf("insert: %v", err)
	}

	change, announced := nextWakeUp(t, l)
	if !announced {
		t.Fatal("first wake-up after a single-row insert announced nothing")
	}
	var seq int64
	if err := st.Pool().QueryRow(ctx, `SELECT seq FROM change_log WHERE resource_id = $1`, id).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	if want := (domain.Change{Seq: seq, ResourceID: id, Owner: "team-a"}); change != want {
		t.Fatalf("announced %+v, want %+v", change, want)
	}
	if _, announced := nextWakeUp(t, l); announced {
		t.Fatal("second wake-up announced an entry: want the bare wake-up after the announcement")
	}

	kept, ok := st.ChangedResource(id)
	if !ok {
		t.Fatal("the announced row was not kept")
	}
	read, err := st.GetResource(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(kept, read) {
		t.Fatalf("announced row differs from the row read:\n announced %+v\n read      %+v", kept, read)
	}
	if _, ok := st.ChangedResource(id); ok {
		t.Fatal("the announced row was given twice")
	}
}

// A read of the change log that brings rows does not bring an announced row again, once
// its reconcile took it: it would be kept where nothing takes it. The row of an entry read
// that was not announced (its announcement not heard) comes with the read as before.
func TestAReadOfTheLogDoesNotBringAnAnnouncedRowAgain(t *testing.T) {
	st := newState(t)
	ctx := testContext(t)
	l := listenAnnounced(t, st)
	mustExec(t, st, `INSERT INTO resources (type, name, owner) VALUES ('runtime', 'announced', 'team-a')`)
	if _, announced := nextWakeUp(t, l); !announced {
		t.Fatal("the insert was not announced")
	}
	announcedID := mustID(t, st, "announced")
	if _, ok := st.ChangedResource(announcedID); !ok {
		t.Fatal("the announced row was not kept")
	}
	// Heard by no one: its row comes only with a read.
	mustExec(t, st, `INSERT INTO resources (type, name, owner) VALUES ('runtime', 'unheard', 'team-a')`)
	// The first read is small, so the next brings rows (the row taken above asked for them).
	for range 2 {
		changes, err := st.ChangesAfter(ctx, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(changes) != 2 {
			t.Fatalf("read %d entries, want 2", len(changes))
		}
	}
	if r, ok := st.ChangedResource(mustID(t, st, "unheard")); !ok || r.Name != "unheard" {
		t.Fatalf("the row of the entry not announced: %+v, %v; want it brought by the read", r, ok)
	}
	if _, ok := st.ChangedResource(announcedID); ok {
		t.Fatal("the read brought the announced row again")
	}
}

// A statement that creates several resources, and a resource whose row would not fit a
// notification, are announced by the bare wake-up only; the insert of the large row works.
func TestManyRowsAndLargeRowsAreNotAnnounced(t *testing.T) {
	st := newState(t)
	l := listenAnnounced(t, st)
	mustExec(t, st, `INSERT INTO resources (type, name, owner) SELECT 'runtime', 'r' || i, 'team-a' FROM generate_series(1, 3) i`)
	if _, announced := nextWakeUp(t, l); announced {
		t.Fatal("a three-row insert was announced")
	}
	large := strings.Repeat("x", 9000)
	mustExec(t, st, `INSERT INTO resources (type, name, owner, args) VALUES ('runtime', 'large', 'team-a', jsonb_build_object('blob', $1::text))`, large)
	if _, announced := nextWakeUp(t, l); announced {
		t.Fatal("a row of over 8,000 bytes was announced")
	}
	if _, ok := st.ChangedResource(mustID(t, st, "large")); ok {
		t.Fatal("a row not announced was kept")
	}
}

func mustID(t *testing.T, st *postgres.State, name string) string {
	t.Helper()
	var id string
	if err := st.Pool().QueryRow(testContext(t), `SELECT id::text FROM resources WHERE name = $1`, name).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// The announcements' channel is the agent's secret: a client role may not read its name,
// hears only the bare wake-ups when it listens as the agent does, and no statement the
// server shows holds the name; a client's insert is announced to the agent all the same.
func TestTheAnnouncementsChannelIsTheAgentsSecret(t *testing.T) {
	agent, client, _ := withClient(t)
	ctx := testContext(t)
	if _, err := client.Pool().Exec(ctx, `SELECT name FROM announce_channel`); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("a client's read of the channel's name: %v, want permission denied", err)
	}
	agentListener := listenAnnounced(t, agent)
	clientListener := listenAnnounced(t, client)
	if _, err := client.CreateResource(ctx, runtime("web")); err != nil {
		t.Fatalf("create as a client: %v", err)
	}
	if _, announced := nextWakeUp(t, clientListener); announced {
		t.Fatal("the client's listener heard an announcement")
	}
	if change, announced := nextWakeUp(t, agentListener); !announced || change.Owner != "alice" {
		t.Fatalf("the agent's listener: announced %v (%+v), want the client's insert announced", announced, change)
	}
	var name string
	if err := agent.Pool().QueryRow(ctx, `SELECT name FROM announce_channel`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	var shown int
	if err := agent.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE position($1 in query) > 0`, name).Scan(&shown); err != nil {
		t.Fatal(err)
	}
	if shown != 0 {
		t.Fatalf("%d sessions show the channel's name in their statement", shown)
	}
}

// An announcement the agent cannot read wakes it as a bare wake-up, and keeps nothing.
func TestAnUnreadableAnnouncementIsABareWakeUp(t *testing.T) {
	st := newState(t)
	l := listenAnnounced(t, st)
	for _, payload := range []string{`not json`, `{"seq": 0, "row": {"id": "x"}}`, `{"seq": 7, "row": {}}`} {
		mustExec(t, st, `SELECT pg_notify(name, $1) FROM announce_channel`, payload)
		if change, announced := nextWakeUp(t, l); announced {
			t.Fatalf("payload %q announced %+v", payload, change)
		}
	}
}

// Without the channel (a schema before migration 0029, or its row deleted) an insert works
// and wakes the agent; nothing is announced.
func TestInsertsWorkWithoutTheAnnouncementsChannel(t *testing.T) {
	st := newState(t)
	l := listenAnnounced(t, st)
	mustExec(t, st, `DELETE FROM announce_channel`)
	mustCreate(t, st, runtime("web"))
	if _, announced := nextWakeUp(t, l); announced {
		t.Fatal("announced without a channel")
	}
}

// A role the owner's default privileges grant reading every new table is granted nothing on
// the announcements' channel by the migration that makes it, and reads the other tables.
func TestDefaultPrivilegesDoNotGiveAwayTheAnnouncementsChannel(t *testing.T) {
	dbURL := pgtest.New(t)
	st := openAs(t, dbURL)
	role, _ := clientRole(t, st, dbURL)
	mustExec(t, st, `ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO `+role)
	if err := st.Migrate(testContext(t)); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	var channel, resources bool
	if err := st.Pool().QueryRow(testContext(t), `
		SELECT has_table_privilege($1, 'announce_channel', 'SELECT'), has_table_privilege($1, 'resources', 'SELECT')`,
		role).Scan(&channel, &resources); err != nil {
		t.Fatal(err)
	}
	if channel || !resources {
		t.Fatalf("with default privileges: the role reads announce_channel %v (want false), resources %v (want true)", channel, resources)
	}
}
