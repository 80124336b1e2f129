package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
)

// A read of the change log brings its resources' rows only once a row was asked for and
// after a small read; each row is handed out once, as new as its change, and only for the
// entries read; the read after a page of a burst brings none.
func TestChangedRowsComeWithSmallReadsOnceAsked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := migratedState(ctx, t)
	create := func(name string) domain.Resource {
		t.Helper()
		r, err := st.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: name, Owner: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	read := func(after int64, limit int) []domain.Change {
		t.Helper()
		changes, err := st.ChangesAfter(ctx, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		return changes
	}

	first := create("first")
	read(0, 100)
	read(0, 100)
	if _, ok := st.ChangedResource(first.ID); ok {
		t.Fatal("a row was kept before any was asked for")
	}
	read(0, 100)
	got, ok := st.ChangedResource(first.ID)
	if !ok || got.ID != first.ID || got.Name != "first" || got.Generation != first.Generation {
		t.Fatalf("changed row = %+v, %v; want the row of first", got, ok)
	}
	if _, ok := st.ChangedResource(first.ID); ok {
		t.Error("a changed row was handed out twice")
	}

	// Entries past the limit bring no rows.
	second := create("second")
	read(0, 1)
	if _, ok := st.ChangedResource(second.ID); ok {
		t.Error("the row of an entry not read was kept")
	}

	// A burst: its first page, read after a small read, brings the rows of its first
	// changedRowsBelow entries and no more; the read after a page brings none, and the read
	// after that small read brings them again.
	before := read(0, 0)
	var burstIDs []string
	for i := range changedRowsBelow + 2 {
		burstIDs = append(burstIDs, create(fmt.Sprintf("burst-%d", i)).ID)
	}
	burst := read(before[len(before)-1].Seq, 1000)
	if len(burst) != changedRowsBelow+2 {
		t.Fatalf("read %d entries of the burst, want %d", len(burst), changedRowsBelow+2)
	}
	for i, id := range burstIDs {
		_, ok := st.ChangedResource(id)
		if want := i < changedRowsBelow; ok != want {
			t.Errorf("row of the burst's entry %d kept = %v, want %v (rows come for the first %d entries)", i, ok, want, changedRowsBelow)
		}
	}
	last := burst[len(burst)-1]
	third := create("third")
	read(last.Seq, 1000)
	if _, ok := st.ChangedResource(third.ID); ok {
		t.Error("a row was kept from the read after a page")
	}
	fourth := create("fourth")
	read(last.Seq, 1000)
	if got, ok := st.ChangedResource(fourth.ID); !ok || got.Name != "fourth" {
		t.Errorf("changed row after the burst = %+v, %v; want the row of fourth", got, ok)
	}
}

// The announced entries a read passes are forgotten, so that the set stays as small as the
// entries not read yet.
func TestAnnouncedEntriesAreForgottenOnceReadPast(t *testing.T) {
	var c changedRows
	for seq := int64(5); seq <= 7; seq++ {
		c.keepAnnounced(seq, domain.Resource{ID: fmt.Sprint("r", seq)})
	}
	if got := c.announcedAfter(6); len(got) != 1 || got[0] != 7 {
		t.Fatalf("announced after 6 = %v, want [7]", got)
	}
	c.keep(nil, 7, 1)
	if got := c.announcedAfter(0); len(got) != 0 {
		t.Fatalf("announced after a read past 7 = %v, want none", got)
	}
}
