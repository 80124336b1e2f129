package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/berth-dev/berth/internal/testkit"
)

// groupState opens a State on a new file with a table of names to write.
func groupState(t *testing.T) *State {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "berth.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := s.write.Exec(`CREATE TABLE names (name text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	return s
}

func insertName(name string) func(tx *sql.Tx) error {
	return func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO names (name) VALUES ($1)`, name)
		return err
	}
}

func names(t *testing.T, s *State) []string {
	t.Helper()
	rows, err := s.read.Query(`SELECT name FROM names ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := collectRows(rows, func(row rowScanner) (name string, err error) {
		err = row.Scan(&name)
		return name, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// holdLead starts a write that keeps the commit in progress open until release is closed,
// so that the writes started meanwhile queue behind it and share the next commit.
func holdLead(t *testing.T, s *State) (release func(), done <-chan error) {
	t.Helper()
	entered, gate := make(chan struct{}), make(chan struct{})
	result := make(chan error, 1)
	go func() {
		result <- s.inTx(context.Background(), func(tx *sql.Tx) error {
			close(entered)
			<-gate
			return insertName("leader")(tx)
		})
	}()
	<-entered
	return func() { close(gate) }, result
}

// waitQueued waits until n writes wait behind the commit in progress. Nothing announces a
// write joining the queue, so this polls.
func waitQueued(t *testing.T, s *State, n int) {
	t.Helper()
	testkit.Eventually(t, func() error {
		if queued := s.group.Queued(); queued < n {
			return fmt.Errorf("%d writes queued, want %d", queued, n)
		}
		return nil
	})
}

func TestGroupCommitKeepsEachWriteOnItsOwn(t *testing.T) {
	s := groupState(t)
	release, leader := holdLead(t, s)

	failure := errors.New("no such thing")
	var wg sync.WaitGroup
	outcomes := make([]error, 6)
	for i := range outcomes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("w%d", i)
			outcomes[i] = s.inTx(context.Background(), func(tx *sql.Tx) error {
				if err := insertName(name)(tx); err != nil {
					return err
				}
				if i == 2 {
					// A write that fails after writing is rolled back alone.
					return failure
				}
				if i == 4 {
					// A write that breaks a constraint (the leader's row, committed before
					// this group) is refused alone.
					return insertName("leader")(tx)
				}
				return nil
			})
		}()
	}
	waitQueued(t, s, len(outcomes))
	release()
	wg.Wait()
	if err := <-leader; err != nil {
		t.Fatalf("the leading write: %v", err)
	}
	for i, err := range outcomes {
		switch i {
		case 2:
			if !errors.Is(err, failure) {
				t.Errorf("write 2: %v, want its own error", err)
			}
		case 4:
			if err == nil {
				t.Errorf("write 4 broke the primary key and was not refused")
			}
		default:
			if err != nil {
				t.Errorf("write %d: %v", i, err)
			}
		}
	}
	if got, want := names(t, s), []string{"leader", "w0", "w1", "w3", "w5"}; !slices.Equal(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
}

// A write whose caller gives up before it started never runs, and the commits go on.
func TestGroupCommitDropsAWriteItsCallerGaveUp(t *testing.T) {
	s := groupState(t)
	release, leader := holdLead(t, s)

	ctx, cancel := context.WithCancel(context.Background())
	abandoned := make(chan error, 1)
	go func() { abandoned <- s.inTx(ctx, insertName("abandoned")) }()
	waitQueued(t, s, 1)
	cancel()
	if err := <-abandoned; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned write: %v, want context.Canceled", err)
	}
	kept := make(chan error, 1)
	go func() { kept <- s.inTx(context.Background(), insertName("kept")) }()
	waitQueued(t, s, 2)
	release()
	if err := <-leader; err != nil {
		t.Fatal(err)
	}
	if err := <-kept; err != nil {
		t.Fatal(err)
	}
	if got, want := names(t, s), []string{"kept", "leader"}; !slices.Equal(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
}

// Writes in one commit see each other as serial transactions do, and many concurrent
// writers all land.
func TestGroupCommitIsSerial(t *testing.T) {
	s := groupState(t)
	if _, err := s.write.Exec(`CREATE TABLE counter (n int); INSERT INTO counter VALUES (0)`); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	const writers = 200
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.inTx(context.Background(), func(tx *sql.Tx) error {
				var n int
				if err := tx.QueryRow(`SELECT n FROM counter`).Scan(&n); err != nil {
					return err
				}
				_, err := tx.Exec(`UPDATE counter SET n = $1`, n+1)
				return err
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	var n int
	if err := s.read.QueryRow(`SELECT n FROM counter`).Scan(&n); err != nil || n != writers {
		t.Errorf("counter %d, %v; want %d: a read-modify-write was lost", n, err, writers)
	}
}
