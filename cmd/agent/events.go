package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/domain"
)

// defaultEventLimit is how many of a resource's newest events `resource events` shows.
const defaultEventLimit = 50

// eventJSON is an event as -o json prints it.
type eventJSON struct {
	Seq     int64     `json:"seq"`
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"`
	Status  string    `json:"status"`
	Message string    `json:"message"`
}

func newResourceEventsCommand(opts *globalOptions) *cobra.Command {
	var (
		ref   resourceRef
		limit int
		pf    printFlags
	)
	cmd := &cobra.Command{
		Use:   "events ID|NAME [--limit N]",
		Short: "Show a resource's history",
		Long: `Show a resource's history, oldest first: every change of its status and status message
(whoever made it: the agent, the CLI or plain SQL), failed attempts (kind error), health
check transitions between ready and unhealthy (kind health) and drift the agent repaired
(kind repair). --limit keeps the newest N.

History is kept for the agent's --event-retention (default 7 days), also after the resource
is deleted; the history of a deleted resource is found by its ID only.

TIME is when the event was recorded, AGE how long ago; -o wide adds SEQ, the event's place
in the history.

` + refHelp + `

` + printHelp,
		Example: `  berth resource events 3f0c2a9e-6b1d-4c57-9a43-2f1e8d7c6b5a
  berth resource events analytics --owner acme --limit 10 -o json
  berth resource events analytics --owner acme -o jsonpath='{range [?(@.kind=="error")]}{.at}{" "}{.message}{"\n"}{end}'
  berth resource events analytics --owner acme --sort-by .kind --no-headers`,
		Args: idArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := opts.printerFor(cmd, pf, outputTable, outputWide, outputJSON, outputYAML, outputJSONPath)
			if err != nil {
				return err
			}
			if limit < 1 {
				return usageError(fmt.Errorf("--limit: must be at least 1, got %d", limit))
			}
			ctx := cmd.Context()
			st, err := opts.openState(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			id := strings.TrimSpace(args[0])
			if _, err := uuid.Parse(id); err != nil || cmd.Flags().Changed("owner") || ref.typ != "" {
				r, err := ref.resolve(ctx, cmd, domain.NewService(st, opts.catalog()), id)
				if err != nil {
					return needsSchema(err)
				}
				id = r.ID
			}
			events, err := st.ListEvents(ctx, id, limit)
			if err != nil {
				return needsSchema(storeError(err))
			}
			if len(events) == 0 {
				if _, err := st.GetResource(ctx, id); errors.Is(err, domain.ErrNotFound) {
					return storeError(fmt.Errorf("resource %s has no history (it never existed, or was deleted longer ago than the event retention): %w", id, domain.ErrNotFound))
				} else if err != nil {
					return needsSchema(err)
				}
			}
			return eventListing.print(cmd.OutOrStdout(), p, events, opts.clock.Now())
		},
	}
	addPrintFlags(cmd, &pf, false)
	cmd.Flags().IntVar(&limit, "limit", defaultEventLimit, "show the newest N events")
	ref.addFlags(cmd, opts.catalog())
	return cmd
}

// eventListing prints a resource's history as `resource events` does.
var eventListing = listing[domain.Event]{
	columns: []column[domain.Event]{
		{header: "SEQ", wide: true, cell: func(e domain.Event, _ time.Time) string { return fmt.Sprint(e.Seq) }},
		{header: "TIME", cell: func(e domain.Event, _ time.Time) string { return e.At.UTC().Format(time.RFC3339) }},
		{header: "AGE", aging: true, cell: func(e domain.Event, now time.Time) string { return ageCell(e.At, now) }},
		{header: "KIND", cell: func(e domain.Event, _ time.Time) string { return string(e.Kind) }},
		{header: "STATUS", cell: func(e domain.Event, _ time.Time) string { return string(e.Status) }},
		{header: "MESSAGE", cell: func(e domain.Event, _ time.Time) string { return e.Message }},
	},
	view: func(e domain.Event) any {
		return eventJSON{Seq: e.Seq, At: e.At.UTC(), Kind: string(e.Kind), Status: string(e.Status), Message: e.Message}
	},
}
