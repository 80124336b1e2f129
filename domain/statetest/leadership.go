package statetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// leadershipTTL is the ttl the leadership tests claim with.
const leadershipTTL = 15 * time.Second

func mustClaimLeadership(t *testing.T, st domain.LeadershipStore, id string, session int64) (string, bool) {
	t.Helper()
	leader, mine, err := st.ClaimLeadership(testContext(t), id, session, leadershipTTL)
	if err != nil {
		t.Fatalf("claim leadership for %s: %v", id, err)
	}
	return leader, mine
}

// leaderTerm registers agent id, makes it the leader and returns its term.
func leaderTerm(t *testing.T, b *Backend, id string) domain.Term {
	t.Helper()
	session := mustRegister(t, b, id)
	expectLeader(t, b, id, session, id)
	return domain.Term{Holder: id, Session: session}
}

func expectLeader(t *testing.T, st domain.LeadershipStore, id string, session int64, wantLeader string) {
	t.Helper()
	leader, mine := mustClaimLeadership(t, st, id, session)
	if leader != wantLeader || mine != (id == wantLeader) {
		t.Fatalf("claim by %s: leader %q (mine %v), want %q (mine %v)", id, leader, mine, wantLeader, id == wantLeader)
	}
}

func testLeadershipIsClaimedRenewedAndResigned(t *testing.T, b *Backend) {
	ctx := testContext(t)
	a, bb := mustRegister(t, b, "a"), mustRegister(t, b, "b")
	expectLeader(t, b, "a", a, "a")
	expectLeader(t, b, "b", bb, "a")
	expectLeader(t, b, "a", a, "a") // renewed
	agents := mustListAgents(t, b)
	if !agents["a"].Leader || agents["b"].Leader {
		t.Fatalf("agents %+v: want a alone listed as leader", agents)
	}

	// Resigning someone else's lease does nothing.
	if err := b.ResignLeadership(ctx, "b", bb); err != nil {
		t.Fatal(err)
	}
	expectLeader(t, b, "b", bb, "a")

	if err := b.ResignLeadership(ctx, "a", a); err != nil {
		t.Fatal(err)
	}
	if agents := mustListAgents(t, b); agents["a"].Leader {
		t.Fatalf("a is listed as leader after resigning")
	}
	expectLeader(t, b, "b", bb, "b")
	expectLeader(t, b, "a", a, "b")

	// A restarted agent (a newer session of the holder's id) keeps it; an older one does not
	// take it back.
	newer := mustRegister(t, b, "b")
	expectLeader(t, b, "b", newer, "b")
	if leader, mine := mustClaimLeadership(t, b, "b", bb); leader != "b" || mine {
		t.Fatalf("claim by b's older session: leader %q mine %v, want b held by the newer session", leader, mine)
	}
}

func testLeadershipOfADeadOrExpiredHolderIsTaken(t *testing.T, b *Backend) {
	a, c := mustRegister(t, b, "a"), mustRegister(t, b, "c")
	expectLeader(t, b, "a", a, "a")
	setHeartbeatAgo(t, b, "a", time.Hour)
	if agents := mustListAgents(t, b); agents["a"].Leader {
		t.Fatalf("a is listed as leader while not live")
	}
	expectLeader(t, b, "c", c, "c")

	// A holder with no agents row keeps the lease until it expires.
	expectLeader(t, b, "a", a, "c")
	mustExec(t, b, `DELETE FROM agents WHERE id = $1`, "c")
	expectLeader(t, b, "a", a, "c")
	mustExec(t, b, `UPDATE leadership SET expires_at = $1`, time.Now().Add(-time.Minute))
	expectLeader(t, b, "a", a, "a")
}

func testCompetingLeadershipClaimsHaveOneWinner(t *testing.T, b *Backend) {
	const claimers = 8
	type claim struct {
		leader string
		mine   bool
		err    error
	}
	ids := make([]string, claimers)
	sessions := make([]int64, claimers)
	states := make([]domain.State, claimers)
	for i := range ids {
		ids[i] = string(rune('a' + i))
		sessions[i] = mustRegister(t, b, ids[i])
		states[i] = b.Reopen(t)
	}
	ctx := testContext(t)
	results := make([]claim, claimers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var r claim
			r.leader, r.mine, r.err = states[i].ClaimLeadership(ctx, ids[i], sessions[i], leadershipTTL)
			results[i] = r
		}()
	}
	close(start)
	wg.Wait()
	winners := 0
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("claim by %s: %v", ids[i], r.err)
		}
		if r.mine {
			winners++
		}
		if r.leader != results[0].leader || r.mine != (r.leader == ids[i]) {
			t.Errorf("claim by %s: leader %q mine %v; others saw %q", ids[i], r.leader, r.mine, results[0].leader)
		}
	}
	if winners != 1 {
		t.Fatalf("%d claimers won the leadership, want exactly 1: %+v", winners, results)
	}
}

func testLeadershipInputsAreChecked(t *testing.T, b *Backend) {
	ctx := testContext(t)
	for _, tc := range []struct {
		id      string
		session int64
		ttl     time.Duration
		field   string
	}{
		{"", 1, time.Second, "id"},
		{"a", 0, time.Second, "session"},
		{"a", 1, 0, "ttl"},
	} {
		_, _, err := b.ClaimLeadership(ctx, tc.id, tc.session, tc.ttl)
		expectFieldError(t, err, tc.field)
	}
	expectFieldError(t, b.ResignLeadership(ctx, "", 1), "id")
}

func expectFieldError(t *testing.T, err error, field string) {
	t.Helper()
	var fe *domain.FieldError
	if !errors.As(err, &fe) || fe.Field != field {
		t.Errorf("err = %v; want a FieldError on %s", err, field)
	}
}
