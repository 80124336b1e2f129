package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

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
	var limit int
	cmd := &cobra.Command{
		Use:   "events ID [--limit N]",
		Short: "Show a resource's history",
		Long: `Show a resource's history, oldest first: every change of its status and status message
(whoever made it: the agent, the CLI or plain SQL), failed attempts (kind error), health
check transitions between ready and unhealthy (kind health) and drift the agent repaired
(kind repair). --limit keeps the newest N.

History is kept for the agent's --event-retention (default 7 days), also after the resource
is deleted.`,
		Example: `  berth resource events 3f0c2a9e-6b1d-4c57-9a43-2f1e8d7c6b5a
  berth resource events 3f0c2a9e-6b1d-4c57-9a43-2f1e8d7c6b5a --limit 10 -o json`,
		Args: idArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := opts.outputFormat()
			if err != nil {
				return err
			}
			if limit < 1 {
				return fmt.Errorf("--limit: must be at least 1, got %d", limit)
			}
			ctx := cmd.Context()
			st, err := opts.openState(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			events, err := st.ListEvents(ctx, args[0], limit)
			if err != nil {
				return needsSchema(storeError(err))
			}
			if len(events) == 0 {
				if _, err := st.GetResource(ctx, args[0]); errors.Is(err, domain.ErrNotFound) {
					return storeError(fmt.Errorf("resource %s has no history (it never existed, or was deleted longer ago than the event retention): %w", args[0], domain.ErrNotFound))
				} else if err != nil {
					return needsSchema(err)
				}
			}
			if format == outputJSON {
				out := make([]eventJSON, len(events))
				for i, e := range events {
					out[i] = eventJSON{Seq: e.Seq, At: e.At.UTC(), Kind: string(e.Kind), Status: string(e.Status), Message: e.Message}
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			return writeEvents(cmd.OutOrStdout(), events)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", defaultEventLimit, "show the newest N events")
	return cmd
}

func writeEvents(w io.Writer, events []domain.Event) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tKIND\tSTATUS\tMESSAGE")
	for _, e := range events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.At.UTC().Format(time.RFC3339), e.Kind, e.Status, tableText(e.Message))
	}
	return tw.Flush()
}
