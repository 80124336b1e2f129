package statetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// latestEvent returns the newest event's sequence number.
func latestEvent(t *testing.T, st domain.EventLog) int64 {
	t.Helper()
	seq, err := st.LatestEventSeq(testContext(t))
	if err != nil {
		t.Fatalf("latest event seq: %v", err)
	}
	return seq
}

// eventsSince describes the events recorded after seq, of every resource, in order.
func eventsSince(t *testing.T, st domain.EventLog, seq int64) []string {
	t.Helper()
	es, err := st.EventsAfter(testContext(t), seq, 0)
	if err != nil {
		t.Fatalf("events after %d: %v", seq, err)
	}
	return describe(es)
}

// setBackoff gives the resource a failed attempt with a retry due in an hour, directly.
func setBackoff(t *testing.T, b *Backend, id string) {
	t.Helper()
	mustExec(t, b, `UPDATE resources SET attempts = 3, last_error = 'boom', next_attempt_at = $2 WHERE id = $1`, id, time.Now().Add(time.Hour))
}

func expectBackoffReset(t *testing.T, what string, r domain.Resource) {
	t.Helper()
	if r.Attempts != 0 || r.LastError != "" || r.NextAttemptAt != nil {
		t.Errorf("%s: attempts %d, last error %q, next attempt %v; want the retry bookkeeping reset", what, r.Attempts, r.LastError, r.NextAttemptAt)
	}
}

func expectBackoffKept(t *testing.T, what string, r domain.Resource) {
	t.Helper()
	if r.Attempts != 3 || r.LastError != "boom" || r.NextAttemptAt == nil {
		t.Errorf("%s: attempts %d, last error %q, next attempt %v; want the retry bookkeeping kept", what, r.Attempts, r.LastError, r.NextAttemptAt)
	}
}

// control is one control of a resource, made through the store or with plain SQL.
type control struct {
	name string
	do   func(t *testing.T, id string) domain.Resource
	// check says what the control did to the row.
	check func(t *testing.T, before, after domain.Resource)
	// message is the control event's message; resets says whether the retry bookkeeping
	// is reset; repeats whether the same control again is a new one (a retry is).
	message string
	resets  bool
	repeats bool
}

// runControls makes each control on one resource in turn and checks it changed the row,
// recorded exactly one control event with the row's status, logged a change, and reset the
// retry bookkeeping or not; and that making it again records nothing, unless it repeats.
func runControls(t *testing.T, b *Backend, r domain.Resource, controls []control) {
	t.Helper()
	for _, c := range controls {
		setBackoff(t, b, r.ID)
		before := mustGet(t, b, r.ID)
		events, changes := latestEvent(t, b), latestSeq(t, b)
		after := c.do(t, r.ID)
		if got := mustGet(t, b, r.ID); !sameRow(got, after) {
			t.Errorf("%s returned %+v, but the row reads %+v", c.name, after, got)
		}
		c.check(t, before, after)
		want := []string{"control " + string(after.Status) + " " + c.message}
		if got := eventsSince(t, b, events); !slices.Equal(got, want) {
			t.Errorf("%s recorded %q, want %q", c.name, got, want)
		}
		if got := changesSince(t, b, changes); !slices.Equal(got, []string{r.ID}) {
			t.Errorf("%s logged changes %v, want one of %s", c.name, got, r.ID)
		}
		if c.resets {
			expectBackoffReset(t, c.name, after)
		} else {
			expectBackoffKept(t, c.name, after)
		}

		events, changes = latestEvent(t, b), latestSeq(t, b)
		again := c.do(t, r.ID)
		got := eventsSince(t, b, events)
		switch {
		case c.repeats && !slices.Equal(got, want):
			t.Errorf("%s again recorded %q, want %q: it is asked for anew", c.name, got, want)
		case !c.repeats && (len(got) != 0 || len(changesSince(t, b, changes)) != 0 || again.Generation != after.Generation):
			t.Errorf("%s again recorded %q, logged %v, generation %d (was %d); want nothing changed",
				c.name, got, changesSince(t, b, changes), again.Generation, after.Generation)
		}
	}
}

// sameRow compares what the controls change of two reads of a row.
func sameRow(a, b domain.Resource) bool {
	return a.ID == b.ID && a.Paused == b.Paused && a.Hibernate == b.Hibernate && a.Generation == b.Generation &&
		a.Status == b.Status && a.Attempts == b.Attempts && equalTimes(a.RetryRequestedAt, b.RetryRequestedAt) &&
		equalLabels(a.Labels, b.Labels)
}

func equalTimes(a, b *time.Time) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Equal(*b))
}

func equalLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func checkPaused(want bool) func(t *testing.T, before, after domain.Resource) {
	return func(t *testing.T, before, after domain.Resource) {
		t.Helper()
		if after.Paused != want || after.Generation != before.Generation {
			t.Errorf("paused %v, generation %d (was %d); want paused %v at the same generation", after.Paused, after.Generation, before.Generation, want)
		}
	}
}

func checkHibernate(want bool) func(t *testing.T, before, after domain.Resource) {
	return func(t *testing.T, before, after domain.Resource) {
		t.Helper()
		if after.Hibernate != want || after.Generation != before.Generation || after.Status != before.Status {
			t.Errorf("hibernate %v, generation %d (was %d), status %s (was %s); want hibernate %v, the rest as it was",
				after.Hibernate, after.Generation, before.Generation, after.Status, before.Status, want)
		}
	}
}

func checkRetry(t *testing.T, before, after domain.Resource) {
	t.Helper()
	if after.RetryRequestedAt == nil || (before.RetryRequestedAt != nil && !after.RetryRequestedAt.After(*before.RetryRequestedAt)) {
		t.Errorf("retry requested at %v (was %v); want it stamped anew", after.RetryRequestedAt, before.RetryRequestedAt)
	}
	if time.Since(*after.RetryRequestedAt).Abs() > time.Minute {
		t.Errorf("retry requested at %v; want about now", after.RetryRequestedAt)
	}
}

func checkLabels(want map[string]string) func(t *testing.T, before, after domain.Resource) {
	return func(t *testing.T, before, after domain.Resource) {
		t.Helper()
		if !equalLabels(after.Labels, want) || after.Generation != before.Generation+1 {
			t.Errorf("labels %v at generation %d (was %d); want %v at a new generation", after.Labels, after.Generation, before.Generation, want)
		}
	}
}

// storeControls are the controls as the ResourceStore makes them.
func storeControls(b *Backend) []control {
	call := func(f func(ctx context.Context, id string) (domain.Resource, error)) func(t *testing.T, id string) domain.Resource {
		return func(t *testing.T, id string) domain.Resource {
			t.Helper()
			r, err := f(testContext(t), id)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
	}
	labels := map[string]string{"team": "data", "env": "prod", "Tier.a_b": ""}
	return []control{
		{name: "SetPaused(true)", message: "paused", check: checkPaused(true),
			do: call(func(ctx context.Context, id string) (domain.Resource, error) { return b.SetPaused(ctx, id, true) })},
		{name: "SetPaused(false)", message: "resumed", check: checkPaused(false),
			do: call(func(ctx context.Context, id string) (domain.Resource, error) { return b.SetPaused(ctx, id, false) })},
		{name: "SetHibernate(true)", message: "hibernate requested", check: checkHibernate(true), resets: true,
			do: call(func(ctx context.Context, id string) (domain.Resource, error) { return b.SetHibernate(ctx, id, true) })},
		{name: "SetHibernate(false)", message: "wake requested", check: checkHibernate(false), resets: true,
			do: call(func(ctx context.Context, id string) (domain.Resource, error) { return b.SetHibernate(ctx, id, false) })},
		{name: "RequestRetry", message: "retry requested", check: checkRetry, resets: true, repeats: true,
			do: call(func(ctx context.Context, id string) (domain.Resource, error) { return b.RequestRetry(ctx, id) })},
		{name: "SetLabels", message: "labels changed: Tier.a_b=, env=prod, team=data", check: checkLabels(labels), resets: true,
			do: call(func(ctx context.Context, id string) (domain.Resource, error) { return b.SetLabels(ctx, id, labels) })},
		{name: "SetLabels(none)", message: "labels changed: none", check: checkLabels(nil), resets: true,
			do: call(func(ctx context.Context, id string) (domain.Resource, error) { return b.SetLabels(ctx, id, nil) })},
	}
}

func testControlsThroughTheStore(t *testing.T, b *Backend) {
	runControls(t, b, mustCreate(t, b, runtime("web")), storeControls(b))
	runControls(t, b, provisioned(t, b, "ready"), storeControls(b))
}

// testControlsThroughPlainSQL makes the same controls as UPDATEs of the columns, as another
// program would: the triggers give them the same behaviour.
func testControlsThroughPlainSQL(t *testing.T, b *Backend) {
	sql := func(query string) func(t *testing.T, id string) domain.Resource {
		return func(t *testing.T, id string) domain.Resource {
			t.Helper()
			mustExec(t, b, query, id)
			return mustGet(t, b, id)
		}
	}
	// now() in PostgreSQL; in SQLite a time in another form than the stored one, which the
	// trigger puts in that form.
	retry := `UPDATE resources SET retry_requested_at = now() WHERE id = $1`
	if b.Dialect == SQLite {
		retry = `UPDATE resources SET retry_requested_at = strftime('%Y-%m-%d %H:%M:%f', 'now') WHERE id = $1`
	}
	controls := []control{
		{name: "SET paused = true", message: "paused", check: checkPaused(true),
			do: sql(`UPDATE resources SET paused = true WHERE id = $1`)},
		{name: "SET paused = false", message: "resumed", check: checkPaused(false),
			do: sql(`UPDATE resources SET paused = false WHERE id = $1`)},
		{name: "SET hibernate = true", message: "hibernate requested", check: checkHibernate(true), resets: true,
			do: sql(`UPDATE resources SET hibernate = true WHERE id = $1`)},
		{name: "SET hibernate = false", message: "wake requested", check: checkHibernate(false), resets: true,
			do: sql(`UPDATE resources SET hibernate = false WHERE id = $1`)},
		{name: "SET retry_requested_at", message: "retry requested", check: checkRetry, resets: true, repeats: true,
			do: sql(retry)},
		{name: "SET labels", message: "labels changed: b=2, team=data", check: checkLabels(map[string]string{"team": "data", "b": "2"}), resets: true,
			do: sql(`UPDATE resources SET labels = '{"team": "data", "b": "2"}' WHERE id = $1`)},
		{name: "SET labels = '{}'", message: "labels changed: none", check: checkLabels(nil), resets: true,
			do: sql(`UPDATE resources SET labels = '{}' WHERE id = $1`)},
	}
	r := mustCreate(t, b, runtime("web"))
	runControls(t, b, r, controls)

	// (Text that is no JSON at all PostgreSQL refuses as it parses it, naming no column.)
	for _, bad := range []string{`'{"team": 1}'`, `'["team"]'`, `'{"team": null}'`} {
		if _, err := b.Exec(testContext(t), `UPDATE resources SET labels = `+bad+` WHERE id = $1`, r.ID); err == nil ||
			!strings.Contains(err.Error(), "labels") {
			t.Errorf("SET labels = %s: err = %v; want it refused, naming labels", bad, err)
		}
	}
	if _, err := b.Exec(testContext(t), `UPDATE resources SET labels = 'not json' WHERE id = $1`, r.ID); err == nil {
		t.Error("SET labels = 'not json' was accepted")
	}
	if _, err := b.Exec(testContext(t), `INSERT INTO resources (type, name, labels) VALUES ('runtime', 'bad-labels', '{"n": 1}')`); err == nil {
		t.Error("an insert of labels with a number value was accepted")
	}
	mustExec(t, b, `INSERT INTO resources (type, name, labels, paused, hibernate) VALUES ('runtime', 'from-sql', '{"team": "data"}', true, true)`)
	rs, err := b.ListResources(testContext(t), domain.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(rs, func(r domain.Resource) bool { return r.Name == "from-sql" })
	if i < 0 || !rs[i].Paused || !rs[i].Hibernate || rs[i].Labels["team"] != "data" {
		t.Errorf("a row inserted with its controls set reads %+v; want paused, hibernate and its labels", rs)
	}
}

// A resource being deleted is deprovisioned whatever it was asked before: hibernating or
// waking it is refused, by the store with ErrConflict and with plain SQL by the trigger.
func testControlsOfAResourceBeingDeleted(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := provisioned(t, b, "web")
	if _, err := b.SetHibernate(ctx, r.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RequestDelete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	events := latestEvent(t, b)
	_, err := b.SetHibernate(ctx, r.ID, false)
	if want := "resource " + r.ID + " is being deleted: it cannot be hibernated or woken"; !errors.Is(err, domain.ErrConflict) || err == nil || err.Error() != want {
		t.Errorf("wake a resource being deleted: err = %v; want %q wrapping ErrConflict", err, want)
	}
	if _, err := b.Exec(ctx, `UPDATE resources SET hibernate = false WHERE id = $1`, r.ID); err == nil || !strings.Contains(err.Error(), "is being deleted") {
		t.Errorf("SET hibernate = false on a row being deleted: err = %v; want it refused, saying it is being deleted", err)
	}
	if got, err := b.SetHibernate(ctx, r.ID, true); err != nil || !got.Hibernate || got.Status != domain.StatusDeleting {
		t.Errorf("hibernate a deleting resource already asked to hibernate = %+v, %v; want it as it is", got, err)
	}
	if _, err := b.SetLabels(ctx, r.ID, map[string]string{"team": "data"}); !errors.Is(err, domain.ErrConflict) {
		t.Errorf("label a resource being deleted: err = %v; want ErrConflict", err)
	}
	if got := eventsSince(t, b, events); len(got) != 0 {
		t.Errorf("refused controls recorded %q; want nothing", got)
	}
	// Pausing holds the delete back until resumed; a retry restarts its backoff.
	if got, err := b.SetPaused(ctx, r.ID, true); err != nil || !got.Paused {
		t.Errorf("pause a resource being deleted = %+v, %v; want it paused", got, err)
	}
	if got, err := b.RequestRetry(ctx, r.ID); err != nil || got.RetryRequestedAt == nil {
		t.Errorf("retry a resource being deleted = %+v, %v; want it stamped", got, err)
	}

	for _, id := range []string{missingID, "not-a-uuid"} {
		for name, do := range map[string]func() (domain.Resource, error){
			"SetPaused":    func() (domain.Resource, error) { return b.SetPaused(ctx, id, true) },
			"SetHibernate": func() (domain.Resource, error) { return b.SetHibernate(ctx, id, true) },
			"RequestRetry": func() (domain.Resource, error) { return b.RequestRetry(ctx, id) },
			"SetLabels":    func() (domain.Resource, error) { return b.SetLabels(ctx, id, map[string]string{"a": "b"}) },
		} {
			if _, err := do(); !errors.Is(err, domain.ErrNotFound) {
				t.Errorf("%s(%s): err = %v; want ErrNotFound", name, id, err)
			}
		}
	}
}

// ListResources keeps the resources a selector matches, and the limit counts those.
func testListResourcesBySelector(t *testing.T, b *Backend) {
	ctx := testContext(t)
	labelled := func(name string, labels map[string]string) domain.Resource {
		nr := runtime(name)
		nr.Labels = labels
		return mustCreate(t, b, nr)
	}
	labelled("a", map[string]string{"team": "web"})
	labelled("b", map[string]string{"team": "data", "tier": "prod"})
	labelled("c", nil)
	labelled("d", map[string]string{"team": "data", "tier": "dev"})
	labelled("e", map[string]string{"team": "data"})
	if r := mustGet(t, b, labelled("f", map[string]string{"x": "1"}).ID); !equalLabels(r.Labels, map[string]string{"x": "1"}) {
		t.Errorf("labels created with %v read %v", map[string]string{"x": "1"}, r.Labels)
	}
	for _, tc := range []struct {
		selector string
		limit    int
		want     []string
	}{
		{"team=data", 0, []string{"b", "d", "e"}},
		{"team=data", 2, []string{"b", "d"}},
		{"team=data,tier!=prod", 0, []string{"d", "e"}},
		{"!team", 1, []string{"c"}},
		{"tier in (prod,dev)", 0, []string{"b", "d"}},
		{"", 2, []string{"a", "b"}},
		{"nobody=here", 3, nil},
	} {
		sel, err := domain.ParseSelector(tc.selector)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := b.ListResources(ctx, domain.ListFilter{Selector: sel, Limit: tc.limit})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rs {
			got = append(got, r.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("list %q, limit %d: %v; want %v", tc.selector, tc.limit, got, tc.want)
		}
	}
}

// status_changed_at moves when the status changes, whoever changes it, and only then.
func testStatusChangedAtFollowsTheStatus(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("web"))
	if r.StatusChangedAt.IsZero() || r.StatusChangedAt.Before(r.CreatedAt.Add(-time.Second)) || r.StatusChangedAt.After(r.CreatedAt.Add(time.Second)) {
		t.Fatalf("new resource: status changed at %v, created at %v; want its creation", r.StatusChangedAt, r.CreatedAt)
	}
	past := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	// rewind sets status_changed_at an hour back, then runs write and reports whether it
	// moved (to about now) or stayed.
	moved := func(what string, write func()) bool {
		t.Helper()
		mustExec(t, b, `UPDATE resources SET status_changed_at = $2 WHERE id = $1`, r.ID, past)
		if got := mustGet(t, b, r.ID).StatusChangedAt; !got.Equal(past) {
			t.Fatalf("status_changed_at written %v reads %v", past, got)
		}
		write()
		got := mustGet(t, b, r.ID).StatusChangedAt
		if !got.Equal(past) && time.Since(got).Abs() > time.Minute {
			t.Fatalf("%s: status changed at %v; want it kept or about now", what, got)
		}
		return !got.Equal(past)
	}
	for _, tc := range []struct {
		what  string
		write func()
		moves bool
	}{
		{"a message change", func() { mustExec(t, b, `UPDATE resources SET status_message = 'still pending' WHERE id = $1`, r.ID) }, false},
		{"a control", func() {
			if _, err := b.SetPaused(ctx, r.ID, true); err != nil {
				t.Fatal(err)
			}
			if _, err := b.SetPaused(ctx, r.ID, false); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"a status change with SQL", func() { mustExec(t, b, `UPDATE resources SET status = 'error' WHERE id = $1`, r.ID) }, true},
		{"the status written again", func() { mustExec(t, b, `UPDATE resources SET status = 'error' WHERE id = $1`, r.ID) }, false},
		{"the agent's progress record", func() {
			mustExec(t, b, `UPDATE resources SET status = 'pending', status_message = '', reason = 'Created' WHERE id = $1`, r.ID)
			mustExec(t, b, `UPDATE resources SET status_changed_at = $2 WHERE id = $1`, r.ID, past)
			lease := mustClaim(t, b, r.ID, "agent-a")
			if _, err := b.RecordProgress(ctx, r.ID, lease, domain.ProgressUpdate{Generation: r.Generation,
				Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning, StatusMessage: "provisioning", ReleaseLease: true}); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"a delete request", func() {
			if _, err := b.RequestDelete(ctx, r.ID); err != nil {
				t.Fatal(err)
			}
		}, true},
	} {
		if got := moved(tc.what, tc.write); got != tc.moves {
			t.Errorf("%s: status_changed_at moved %v; want %v", tc.what, got, tc.moves)
		}
	}

	started := mustCreate(t, b, runtime("started"))
	mustExec(t, b, `UPDATE resources SET status_changed_at = $2 WHERE id = $1`, started.ID, past)
	c, err := b.ClaimAndStart(ctx, started.ID, "agent-a", ttl, defaultStart)
	if err != nil || !c.Started {
		t.Fatalf("claim and start: %+v, %v", c, err)
	}
	if c.Resource.StatusChangedAt.Equal(past) || !c.Resource.StatusChangedAt.Equal(mustGet(t, b, started.ID).StatusChangedAt) {
		t.Errorf("claim and start: status changed at %v (stored %v); want it moved", c.Resource.StatusChangedAt, mustGet(t, b, started.ID).StatusChangedAt)
	}
	healthy := provisioned(t, b, "healthy")
	mustExec(t, b, `UPDATE resources SET status_changed_at = $2 WHERE id = $1`, healthy.ID, past)
	h, err := b.RecordHealth(ctx, healthy.ID, checkedAt(1), domain.HealthUpdate{Status: domain.StatusUnhealthy, Reason: domain.ReasonHealthCheckFailed, StatusMessage: "down", UnhealthySince: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if h.StatusChangedAt.Equal(past) || !h.StatusChangedAt.Equal(mustGet(t, b, healthy.ID).StatusChangedAt) {
		t.Errorf("health check to unhealthy: status changed at %v; want it moved", h.StatusChangedAt)
	}
}

// EventsAfter is the feed of every resource's events in order, and ListenEvents wakes on a
// new one, from this store, another, or plain SQL.
func testEventFeed(t *testing.T, b *Backend) {
	ctx := testContext(t)
	if seq := latestEvent(t, b); seq != 0 {
		t.Fatalf("latest event of an empty store: %d, want 0", seq)
	}
	l, err := b.ListenEvents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	done := waitResult(ctx, l)
	a := mustCreate(t, b, runtime("a"))
	if err := receive(t, done); err != nil {
		t.Fatalf("wait for the creation's event: %v", err)
	}
	r := mustCreate(t, b, runtime("b"))
	if _, err := b.SetPaused(ctx, a.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RequestDelete(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	es, err := b.EventsAfter(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"status pending created", "status pending created", "control pending paused", "status deleting delete requested"}
	if got := describe(es); !slices.Equal(got, want) {
		t.Fatalf("events after 0: %q; want %q", got, want)
	}
	if es[0].ResourceID != a.ID || es[1].ResourceID != r.ID || es[2].ResourceID != a.ID || es[3].ResourceID != r.ID {
		t.Errorf("events' resources %v; want a, b, a, b", es)
	}
	for i := 1; i < len(es); i++ {
		if es[i].Seq <= es[i-1].Seq {
			t.Errorf("events out of order: %v", es)
		}
	}
	if seq := latestEvent(t, b); seq != es[3].Seq {
		t.Errorf("latest event %d; want %d", seq, es[3].Seq)
	}
	page, err := b.EventsAfter(ctx, es[0].Seq, 2)
	if err != nil || len(page) != 2 || page[0].Seq != es[1].Seq || page[1].Seq != es[2].Seq {
		t.Errorf("two events after the first: %v, %v; want the second and third", page, err)
	}

	other := b.Reopen(t)
	done = waitResult(ctx, l)
	if _, err := other.SetHibernate(ctx, a.ID, true); err != nil {
		t.Fatal(err)
	}
	if err := receive(t, done); err != nil {
		t.Fatalf("wait for another store's control event: %v", err)
	}
	done = waitResult(ctx, l)
	mustExec(t, b, `UPDATE resources SET status_message = 'noted' WHERE id = $1`, a.ID)
	if err := receive(t, done); err != nil {
		t.Fatalf("wait for an event of a write made with SQL: %v", err)
	}
}

// The controls are columns of the row: another store opened on the same database (the agent
// after a restart) reads them as they were left.
func testControlsSurviveARestart(t *testing.T, b *Backend) {
	ctx := testContext(t)
	nr := runtime("web")
	nr.Labels = map[string]string{"team": "data"}
	r := mustCreate(t, b, nr)
	if _, err := b.SetPaused(ctx, r.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SetHibernate(ctx, r.ID, true); err != nil {
		t.Fatal(err)
	}
	want, err := b.RequestRetry(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Reopen(t).GetResource(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Paused || !got.Hibernate || !equalTimes(got.RetryRequestedAt, want.RetryRequestedAt) ||
		!equalLabels(got.Labels, nr.Labels) || !got.StatusChangedAt.Equal(want.StatusChangedAt) {
		t.Errorf("after a restart: %+v; want %+v", got, want)
	}
	if es := describe(events(t, b, r.ID, 0)); !slices.Equal(es, []string{"status pending created", "control pending paused",
		"control pending hibernate requested", "control pending retry requested"}) {
		t.Errorf("history after a restart: %q", es)
	}
}

// Both stores give a resource's times in UTC, so that two reads of one row compare equal
// whichever store made them.
func testResourceTimesAreInUTC(t *testing.T, b *Backend) {
	ctx := testContext(t)
	r := mustCreate(t, b, runtime("web"))
	lease := mustClaim(t, b, r.ID, "agent-a")
	if _, err := b.RecordProgress(ctx, r.ID, lease, domain.ProgressUpdate{Generation: 1, Status: domain.StatusProvisioning, Reason: domain.ReasonProvisioning,
		StatusMessage: "attempt 1 failed", Attempts: 1, RetryIn: time.Hour}); err != nil {
		t.Fatal(err)
	}
	got, err := b.RequestRetry(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	got = mustGet(t, b, got.ID)
	times := map[string]time.Time{"created_at": got.CreatedAt, "updated_at": got.UpdatedAt, "status_changed_at": got.StatusChangedAt,
		"retry_requested_at": *got.RetryRequestedAt, "lease_expires_at": *got.LeaseExpiresAt}
	for name, at := range times {
		if at.Location() != time.UTC {
			t.Errorf("%s is in %v; want UTC", name, at.Location())
		}
	}
}
