package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/domain"
)

// Reads made at the same time, of different rows, of the same row and of rows that do not
// exist, each get their own row or ErrNotFound, however they are grouped; a caller may
// change the row it got without touching another caller's.
func TestConcurrentReadsEachGetTheirOwnRow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := migratedState(ctx, t)
	var ids []string
	for i := range 20 {
		r, err := st.CreateResource(ctx, domain.NewResource{Type: domain.ResourceTypeRuntime, Name: fmt.Sprintf("r-%d", i), Owner: "acme", Args: map[string]any{"slots": i}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	missing := uuid.NewString()
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for g := range 400 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if g%10 == 9 {
				if _, err := st.GetResource(ctx, missing); !errors.Is(err, domain.ErrNotFound) {
					errs <- fmt.Errorf("read of a missing row: %v, want ErrNotFound", err)
				}
				return
			}
			i := g % len(ids)
			r, err := st.GetResource(ctx, ids[i])
			switch {
			case err != nil:
				errs <- fmt.Errorf("read %d: %v", i, err)
			case r.ID != ids[i] || r.Name != fmt.Sprintf("r-%d", i) || fmt.Sprint(r.Args["slots"]) != fmt.Sprint(i):
				errs <- fmt.Errorf("read %d got %s %q args %v", i, r.ID, r.Name, r.Args)
			default:
				r.Args["slots"] = -1 // the caller's own copy
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
