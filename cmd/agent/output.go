package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"sigs.k8s.io/yaml"

	"github.com/berth-dev/berth/domain"
)

// resourceJSON is a resource as -o json prints it: exactly these keys, args and config with
// their JSON types (slots is a number), waiting_since and last_attempt_at null when unset.
type resourceJSON struct {
	ID                 string         `json:"id"`
	Type               string         `json:"type"`
	Name               string         `json:"name"`
	Owner              string         `json:"owner"`
	Provisioner        string         `json:"provisioner"`
	Status             string         `json:"status"`
	Reason             string         `json:"reason"`
	StatusMessage      string         `json:"status_message"`
	WaitingSince       *time.Time     `json:"waiting_since"`
	LastAttemptAt      *time.Time     `json:"last_attempt_at"`
	Args               map[string]any `json:"args"`
	Config             map[string]any `json:"config"`
	Labels             labelsJSON     `json:"labels"`
	Paused             bool           `json:"paused"`
	Hibernate          bool           `json:"hibernate"`
	Generation         int64          `json:"generation"`
	ObservedGeneration int64          `json:"observed_generation"`
	Conditions         conditionList  `json:"conditions"`
	// Unreadable says which columns Berth cannot decode, and why; absent when none.
	Unreadable string `json:"unreadable,omitempty"`
}

func toJSON(r domain.Resource) resourceJSON {
	return resourceJSON{
		ID:                 r.ID,
		Type:               string(r.Type),
		Name:               r.Name,
		Owner:              r.Owner,
		Provisioner:        r.Provisioner,
		Status:             string(r.Status),
		Reason:             string(r.Reason),
		StatusMessage:      r.StatusMessage,
		WaitingSince:       utc(r.WaitingSince),
		LastAttemptAt:      utc(r.LastAttemptAt),
		Args:               nonNil(r.Args),
		Config:             nonNil(r.Config),
		Labels:             toLabelsJSON(r.Labels),
		Paused:             r.Paused,
		Hibernate:          r.Hibernate,
		Generation:         r.Generation,
		ObservedGeneration: r.ObservedGeneration,
		Conditions:         toConditionsJSON(r),
		Unreadable:         r.UnreadableReason(),
	}
}

// utc is *t in UTC, nil for nil.
func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func nonNil(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeData prints v as -o json or -o yaml says. The YAML is the JSON converted, so that
// both have the same field names and values.
func writeData(w io.Writer, format string, v any) error {
	if format != outputYAML {
		return writeJSON(w, v)
	}
	out, err := toYAML(v)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

func toYAML(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(data)
}

// writeResourceTable prints one resource as aligned "field: value" lines.
func writeResourceTable(w io.Writer, r domain.Resource) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	provisioner := r.Provisioner
	if provisioner == "" {
		provisioner = "(the agent's default, not yet chosen)"
	}
	rows := [][2]string{
		{"id", r.ID},
		{"type", string(r.Type)},
		{"name", r.Name},
		{"owner", r.Owner},
		{"provisioner", provisioner},
		{"status", statusText(r)},
		{"reason", string(r.Reason)},
		{"status message", r.StatusMessage},
		{"args", formatMap(r.Args)},
		{"labels", labelText(r.Labels)},
		{"config", formatMap(r.Config)},
		{"generation", fmt.Sprintf("%d (observed %d)", r.Generation, r.ObservedGeneration)},
	}
	if !r.Readable() {
		rows = append(rows, [2]string{"unreadable", r.UnreadableReason()})
	}
	for _, row := range rows {
		fmt.Fprintf(tw, "%s:\t%s\n", row[0], tableText(row[1]))
	}
	return tw.Flush()
}

// writeCreated prints what `resource create` made: a summary line, the client config one key
// a line (host first) when the resource has one, and the id as the last line.
func writeCreated(w io.Writer, r domain.Resource) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	provisioner := ""
	if r.Provisioner != "" {
		provisioner = ", provisioner " + tableText(r.Provisioner)
	}
	fmt.Fprintf(tw, "created %s %q%s (status %s%s)\n", r.Type, r.Name, ownerText(r.Owner), r.Status, provisioner)
	keys := slices.Sorted(maps.Keys(r.Config))
	if i := slices.Index(keys, "host"); i > 0 {
		keys = append([]string{"host"}, slices.Delete(keys, i, i+1)...)
	}
	for _, k := range keys {
		fmt.Fprintf(tw, "  %s:\t%s\n", tableText(k), tableText(formatValue(r.Config[k])))
	}
	fmt.Fprintln(tw, r.ID)
	return tw.Flush()
}

// writeResourceList prints resources as an aligned table with a header.
func writeResourceList(w io.Writer, rs []domain.Resource) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTYPE\tNAME\tOWNER\tPROVISIONER\tSTATUS\tGEN\tARGS\tMESSAGE")
	for _, r := range rs {
		gen := fmt.Sprint(r.Generation)
		if r.ObservedGeneration != r.Generation {
			gen = fmt.Sprintf("%d (observed %d)", r.Generation, r.ObservedGeneration)
		}
		status, args, message := statusText(r), formatMap(r.Args), r.StatusMessage
		if !r.Readable() {
			// A row another program wrote that Berth cannot decode: listed, marked, never
			// hiding the rows after it.
			status += " (unreadable)"
			if r.ArgsUnreadable() {
				args = "?"
			}
			message = r.UnreadableReason()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.ID, r.Type, tableText(r.Name), tableText(r.Owner), tableText(r.Provisioner), status,
			gen, tableText(args), tableText(message))
	}
	return tw.Flush()
}

// formatMap renders a map as sorted key=value pairs, values other than strings as JSON.
func formatMap(m map[string]any) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+formatValue(m[k]))
	}
	return strings.Join(parts, " ")
}

// formatValue renders a string as it is and any other value as JSON.
func formatValue(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// tableText keeps a value on one table cell: control characters (tabs, newlines) become
// spaces.
func tableText(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}
