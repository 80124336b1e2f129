package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/domain"
)

// statusDeleted is the status a watch prints a removed resource with.
const statusDeleted domain.Status = "deleted"

// watchHelp explains --watch in the help of the commands that take it.
const watchHelp = `With --watch (-w) the command prints the current view, then each change as it happens (one
table row lined up with the table, one JSON or YAML document, one -o name line or one
-o jsonpath line per change; a removed resource once more with status deleted) until
Ctrl-C. Changes come from the resources' history as it is recorded, whoever makes them (the
agent, the CLI, plain SQL).`

func addWatchFlag(cmd *cobra.Command, watch *bool) {
	cmd.Flags().BoolVarP(watch, "watch", "w", false, "after printing, print each change as it happens until Ctrl-C")
}

// watchList prints the resources f lists, then each change of them, until ctx ends: the end
// of a watch (Ctrl-C), so not an error.
func watchList(cmd *cobra.Command, opts *globalOptions, svc *domain.Service, p printer, f domain.ListFilter) error {
	ctx := cmd.Context()
	w := newWatchPrinter(cmd.OutOrStdout(), p, opts.clock.Now)
	err := svc.WatchResources(ctx, opts.clock, f, opts.pollInterval, w.initial, w.change)
	return watchEnd(ctx, flagError(err))
}

// watchOne prints the resource with id, then each change of it, until it is removed or ctx
// ends.
func watchOne(cmd *cobra.Command, opts *globalOptions, svc *domain.Service, p printer, id string) error {
	ctx := cmd.Context()
	w := newWatchPrinter(cmd.OutOrStdout(), p, opts.clock.Now)
	err := svc.WatchResource(ctx, opts.clock, id, opts.pollInterval,
		func(r domain.Resource) error { return w.initial([]domain.Resource{r}) }, w.change)
	return watchEnd(ctx, storeError(err))
}

// watchEnd is nil when err is only the end of ctx.
func watchEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	return err
}

// watchPrinter prints what a watch reports. In table form (-o wide too) that is the list's
// table: the header and the current view (in --sort-by's order), then a row per change.
// The columns keep their widths from the current view and their minimums (every status
// word fits), so that later rows line up; a longer value widens its column from its row
// on. In the other forms it is one item per resource (YAML documents start with ---). A
// resource that would print as it last did, but for its ages, is not printed again.
type watchPrinter struct {
	w       io.Writer
	p       printer
	now     func() time.Time
	cols    []column[domain.Resource]
	aligner *aligner
	last    map[string]string // what was last printed of each resource, ages left out
}

func newWatchPrinter(w io.Writer, p printer, now func() time.Time) *watchPrinter {
	return &watchPrinter{w: w, p: p, now: now, cols: resourceListing.visible(p), last: map[string]string{}}
}

func (wp *watchPrinter) initial(rs []domain.Resource) error {
	if err := resourceListing.sort(wp.p, rs); err != nil {
		return err
	}
	if wp.table() {
		rows := resourceListing.rows(wp.cols, rs, wp.now())
		wp.aligner = newAligner(wp.cols, wp.p, rows, true)
		if !wp.p.noHeaders {
			if _, err := io.WriteString(wp.w, wp.aligner.line(headers(wp.cols))); err != nil {
				return err
			}
		}
	}
	for _, r := range rs {
		if err := wp.print(r); err != nil {
			return err
		}
	}
	return nil
}

func (wp *watchPrinter) change(c domain.ResourceChange) error {
	r := c.Resource
	if c.Removed {
		r.Status = statusDeleted
	}
	return wp.print(r)
}

func (wp *watchPrinter) table() bool {
	return wp.p.format == outputTable || wp.p.format == outputWide
}

func (wp *watchPrinter) print(r domain.Resource) error {
	key, out, err := wp.format(r)
	if err != nil {
		return err
	}
	if wp.last[r.ID] == key {
		return nil
	}
	if r.Status == statusDeleted {
		delete(wp.last, r.ID)
	} else {
		wp.last[r.ID] = key
	}
	_, err = io.WriteString(wp.w, out)
	return err
}

// format is what r prints as, and that without what changes as time passes.
func (wp *watchPrinter) format(r domain.Resource) (key, out string, err error) {
	if wp.table() {
		row := resourceListing.rows(wp.cols, []domain.Resource{r}, wp.now())[0]
		var timeless []string
		for i, c := range wp.cols {
			if !c.aging {
				timeless = append(timeless, row[i])
			}
		}
		wp.aligner.fit(row)
		return strings.Join(timeless, "\t"), wp.aligner.line(row), nil
	}
	var buf bytes.Buffer
	if wp.p.format == outputYAML {
		buf.WriteString("---\n")
	}
	if err := resourceListing.printOne(&buf, wp.p, r, wp.now()); err != nil {
		return "", "", err
	}
	if wp.p.format == outputJSONPath {
		buf.WriteString("\n")
	}
	view := toJSON(r)
	view.UpdatedAt = time.Time{}
	timeless, err := json.Marshal(view)
	return string(timeless), buf.String(), err
}
