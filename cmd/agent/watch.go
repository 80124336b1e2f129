package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/domain"
)

// statusDeleted is the status a watch prints a removed resource with.
const statusDeleted domain.Status = "deleted"

// watchHelp explains --watch in the help of the commands that take it.
const watchHelp = `With --watch (-w) the command prints the current view, then each change as it happens (one
table row, or one JSON or YAML document, per change; a removed resource once more with status
deleted) until Ctrl-C. Changes come from the resources' history as it is recorded, whoever
makes them (the agent, the CLI, plain SQL).`

func addWatchFlag(cmd *cobra.Command, watch *bool) {
	cmd.Flags().BoolVarP(watch, "watch", "w", false, "after printing, print each change as it happens until Ctrl-C")
}

// watchList prints the resources f lists, then each change of them, until ctx ends: the end
// of a watch (Ctrl-C), so not an error.
func watchList(cmd *cobra.Command, opts *globalOptions, svc *domain.Service, format string, f domain.ListFilter) error {
	ctx := cmd.Context()
	p := newWatchPrinter(cmd.OutOrStdout(), format)
	err := svc.WatchResources(ctx, opts.clock, f, opts.pollInterval, p.initial, p.change)
	return watchEnd(ctx, flagError(err))
}

// watchOne prints the resource with id, then each change of it, until it is removed or ctx
// ends.
func watchOne(cmd *cobra.Command, opts *globalOptions, svc *domain.Service, format, id string) error {
	ctx := cmd.Context()
	p := newWatchPrinter(cmd.OutOrStdout(), format)
	err := svc.WatchResource(ctx, opts.clock, id, opts.pollInterval,
		func(r domain.Resource) error { return p.initial([]domain.Resource{r}) }, p.change)
	return watchEnd(ctx, storeError(err))
}

// watchEnd is nil when err is only the end of ctx.
func watchEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil
	}
	return err
}

// watchPrinter prints what a watch reports. In table form that is the list's table: the
// header and the current view, then a row per change, laid out with the current view's rows
// so that the columns line up. In JSON and YAML it is one document per resource (YAML
// documents start with ---). A resource that would print exactly as it last did is not
// printed again.
type watchPrinter struct {
	w      io.Writer
	format string
	shown  []domain.Resource // the current view, which lays out the table's rows
	last   map[string]string // what was last printed of each resource
}

func newWatchPrinter(w io.Writer, format string) *watchPrinter {
	return &watchPrinter{w: w, format: format, last: map[string]string{}}
}

func (p *watchPrinter) initial(rs []domain.Resource) error {
	if p.format == outputTable {
		p.shown = rs
		var buf bytes.Buffer
		if err := writeResourceList(&buf, rs); err != nil {
			return err
		}
		lines := strings.SplitAfter(buf.String(), "\n")
		for i, r := range rs {
			p.last[r.ID] = lines[i+1]
		}
		_, err := io.WriteString(p.w, buf.String())
		return err
	}
	for _, r := range rs {
		if err := p.print(r); err != nil {
			return err
		}
	}
	return nil
}

func (p *watchPrinter) change(c domain.ResourceChange) error {
	r := c.Resource
	if c.Removed {
		r.Status = statusDeleted
	}
	return p.print(r)
}

func (p *watchPrinter) print(r domain.Resource) error {
	var buf bytes.Buffer
	switch p.format {
	case outputTable:
		if err := writeResourceList(&buf, append(p.shown[:len(p.shown):len(p.shown)], r)); err != nil {
			return err
		}
		lines := strings.SplitAfter(strings.TrimSuffix(buf.String(), "\n"), "\n")
		buf.Reset()
		buf.WriteString(lines[len(lines)-1] + "\n")
	case outputYAML:
		buf.WriteString("---\n")
		fallthrough
	default:
		if err := writeData(&buf, p.format, toJSON(r)); err != nil {
			return err
		}
	}
	out := buf.String()
	if p.last[r.ID] == out {
		return nil
	}
	if r.Status == statusDeleted {
		delete(p.last, r.ID)
	} else {
		p.last[r.ID] = out
	}
	_, err := io.WriteString(p.w, out)
	return err
}
