package storecopy

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Options tunes Copy.
type Options struct {
	// Progress, when set, is called after each batch is written into the target.
	Progress func(Progress)
	// Now is the time against which reconcile leases count as live (see Report.Leases);
	// zero: leases are not reported.
	Now time.Time
}

// Progress is how far the copy of one table has come.
type Progress struct {
	Table  Table
	Copied int64 // rows of Table written so far
	Total  int64 // rows of Table in the source
}

// Report is what Copy copied and verified.
type Report struct {
	Tables []TableReport // in AllTables order
	// Positions are the sequence positions the target continues from.
	Positions Positions
	// Leases are the reconcile leases still live at Options.Now, by holder: they were copied
	// as they are, so the agent of that id resumes those resources at once and any other
	// agent waits until they expire.
	Leases []Lease
}

// TableReport is one table's verified copy.
type TableReport struct {
	Table    Table
	Rows     int64
	Checksum Checksum
}

// Lease is an agent's live reconcile leases.
type Lease struct {
	Holder    string
	Resources int
	Until     time.Time // when the last of them expires
}

// NotEmptyError is Copy's refusal of a target that holds rows.
type NotEmptyError struct {
	Counts Counts // the target's
}

func (e *NotEmptyError) Error() string {
	var held []string
	for _, t := range AllTables {
		if n := e.Counts[t]; n > 0 {
			held = append(held, fmt.Sprintf("%d %s", n, t))
		}
	}
	return "the target already holds Berth data (" + strings.Join(held, ", ") + "): the copy goes only into an empty store"
}

// MismatchError is a failed verification: the target does not hold what the source does.
// Copy returns it before the target's transaction commits, so nothing was copied.
type MismatchError struct {
	Differences []string
}

func (e *MismatchError) Error() string {
	return "the copy does not match the source, so it was not committed: " + strings.Join(e.Differences, "; ")
}

// Copy copies every row of every table of from into to, which must be empty, keeping keys
// and sequence numbers, and verifies the copy before committing it. The target's schema must
// be migrated (Target.Import checks). On any error the target is left as it was.
func Copy(ctx context.Context, from Source, to Target, opts Options) (Report, error) {
	var report Report
	err := from.Export(ctx, func(src View) error {
		srcCounts, err := src.Count(ctx)
		if err != nil {
			return fmt.Errorf("count the source's rows: %w", err)
		}
		srcPositions, err := src.Positions(ctx)
		if err != nil {
			return fmt.Errorf("read the source's sequence positions: %w", err)
		}
		return to.Import(ctx, func(dst Importer) error {
			dstCounts, err := dst.Count(ctx)
			if err != nil {
				return fmt.Errorf("count the target's rows: %w", err)
			}
			if !dstCounts.Empty() {
				return &NotEmptyError{Counts: dstCounts}
			}
			srcSummary, leases, err := copyRows(ctx, src, dst, srcCounts, opts)
			if err != nil {
				return err
			}
			if err := dst.SetPositions(ctx, srcPositions); err != nil {
				return fmt.Errorf("set the target's sequence positions: %w", err)
			}
			dstPositions, err := verify(ctx, dst, srcCounts, srcSummary, srcPositions)
			if err != nil {
				return err
			}
			report = Report{Positions: dstPositions, Leases: leases}
			for _, t := range AllTables {
				report.Tables = append(report.Tables, TableReport{Table: t, Rows: srcSummary[t].Rows, Checksum: srcSummary[t].Checksum})
			}
			return nil
		})
	})
	if err != nil {
		return Report{}, err
	}
	return report, nil
}

// copyRows streams the source's rows into the target and returns their summary and the
// leases live at opts.Now.
func copyRows(ctx context.Context, src View, dst Importer, total Counts, opts Options) (Summary, []Lease, error) {
	summary := Summarize()
	leases := map[string]*Lease{}
	copied := Counts{}
	err := src.Read(ctx, func(b Batch) error {
		t := b.Table()
		if t == "" {
			return nil
		}
		if err := summary.Add(b); err != nil {
			return fmt.Errorf("read the source: %w", err)
		}
		if err := dst.Write(ctx, b); err != nil {
			return fmt.Errorf("write %s into the target: %w", t, err)
		}
		if !opts.Now.IsZero() {
			countLeases(leases, b.Resources, opts.Now)
		}
		copied[t] += int64(b.Len())
		if opts.Progress != nil {
			opts.Progress(Progress{Table: t, Copied: copied[t], Total: total[t]})
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	out := make([]Lease, 0, len(leases))
	for _, l := range leases {
		out = append(out, *l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Holder < out[j].Holder })
	return summary, out, nil
}

func countLeases(leases map[string]*Lease, rows []Resource, now time.Time) {
	for _, r := range rows {
		if r.LeaseHolder == nil || r.LeaseExpiresAt == nil || !r.LeaseExpiresAt.After(now) {
			continue
		}
		l := leases[*r.LeaseHolder]
		if l == nil {
			l = &Lease{Holder: *r.LeaseHolder}
			leases[*r.LeaseHolder] = l
		}
		l.Resources++
		if r.LeaseExpiresAt.After(l.Until) {
			l.Until = *r.LeaseExpiresAt
		}
	}
}

// verify compares the target, as its transaction sees it, with the source: each table's
// count, its rows read back (count and checksum), and the sequence positions. It returns the
// target's positions.
func verify(ctx context.Context, dst Importer, srcCounts Counts, srcSummary Summary, srcPositions Positions) (Positions, error) {
	dstCounts, err := dst.Count(ctx)
	if err != nil {
		return Positions{}, fmt.Errorf("count the target's rows: %w", err)
	}
	dstSummary := Summarize()
	if err := dst.Read(ctx, dstSummary.Add); err != nil {
		return Positions{}, fmt.Errorf("read the target back: %w", err)
	}
	dstPositions, err := dst.Positions(ctx)
	if err != nil {
		return Positions{}, fmt.Errorf("read the target's sequence positions: %w", err)
	}
	var diffs []string
	for _, t := range AllTables {
		src, dst := srcSummary[t], dstSummary[t]
		switch {
		case src.Rows != srcCounts[t]:
			diffs = append(diffs, fmt.Sprintf("%s: the source counts %d rows but %d were read", t, srcCounts[t], src.Rows))
		case dstCounts[t] != srcCounts[t] || dst.Rows != src.Rows:
			diffs = append(diffs, fmt.Sprintf("%s: the source has %d rows, the target %d (%d read back)", t, srcCounts[t], dstCounts[t], dst.Rows))
		case dst.Checksum != src.Checksum:
			diffs = append(diffs, fmt.Sprintf("%s: the rows differ (checksum %s in the source, %s in the target)", t, src.Checksum, dst.Checksum))
		}
	}
	if dstPositions.ChangeLog < srcPositions.ChangeLog || dstPositions.Events < srcPositions.Events {
		diffs = append(diffs, fmt.Sprintf("sequence positions: the source is at change log %d, events %d; the target at %d, %d",
			srcPositions.ChangeLog, srcPositions.Events, dstPositions.ChangeLog, dstPositions.Events))
	}
	if len(diffs) > 0 {
		return Positions{}, &MismatchError{Differences: diffs}
	}
	return dstPositions, nil
}
