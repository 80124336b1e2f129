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
	CreatedAt          time.Time      `json:"created_at"`
	UpdatedAt          time.Time      `json:"updated_at"`
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
		CreatedAt:          r.CreatedAt.UTC(),
		UpdatedAt:          r.UpdatedAt.UTC(),
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
		{"created", r.CreatedAt.UTC().Format(time.RFC3339)},
		{"updated", r.UpdatedAt.UTC().Format(time.RFC3339)},
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

// resourceFormats are the -o values of the commands that print resources as a list.
var resourceFormats = []string{outputTable, outputWide, outputJSON, outputYAML, outputName, outputJSONPath}

// resourceListing prints resources as `resource list` does: the table (AGE from the
// creation), -o wide's REASON, UPDATED and LABELS, TYPE/NAME for -o name.
var resourceListing = listing[domain.Resource]{
	columns: []column[domain.Resource]{
		{header: "ID", cell: func(r domain.Resource, _ time.Time) string { return r.ID }},
		{header: "TYPE", cell: func(r domain.Resource, _ time.Time) string { return string(r.Type) }},
		{header: "NAME", cell: func(r domain.Resource, _ time.Time) string { return r.Name }},
		{header: "OWNER", cell: func(r domain.Resource, _ time.Time) string { return r.Owner }},
		{header: "PROVISIONER", cell: func(r domain.Resource, _ time.Time) string { return r.Provisioner }},
		{header: "STATUS", minWidth: statusWidth, cell: func(r domain.Resource, _ time.Time) string {
			if !r.Readable() {
				// A row another program wrote that Berth cannot decode: listed, marked,
				// never hiding the rows after it.
				return statusText(r) + " (unreadable)"
			}
			return statusText(r)
		}},
		{header: "REASON", wide: true, minWidth: reasonWidth, cell: func(r domain.Resource, _ time.Time) string { return string(r.Reason) }},
		{header: "GEN", cell: func(r domain.Resource, _ time.Time) string {
			if r.ObservedGeneration != r.Generation {
				return fmt.Sprintf("%d (observed %d)", r.Generation, r.ObservedGeneration)
			}
			return fmt.Sprint(r.Generation)
		}},
		{header: "AGE", aging: true, minWidth: ageWidth, cell: func(r domain.Resource, now time.Time) string { return ageCell(r.CreatedAt, now) }},
		{header: "UPDATED", wide: true, aging: true, minWidth: ageWidth, cell: func(r domain.Resource, now time.Time) string { return ageCell(r.UpdatedAt, now) }},
		{header: "ARGS", cell: func(r domain.Resource, _ time.Time) string {
			if r.ArgsUnreadable() {
				return "?"
			}
			return formatMap(r.Args)
		}},
		{header: "LABELS", labels: true, cell: func(r domain.Resource, _ time.Time) string { return labelsCell(r.Labels) }},
		{header: "MESSAGE", cell: func(r domain.Resource, _ time.Time) string {
			if !r.Readable() {
				return r.UnreadableReason()
			}
			return r.StatusMessage
		}},
	},
	view: func(r domain.Resource) any { return toJSON(r) },
	name: func(r domain.Resource) string { return string(r.Type) + "/" + r.Name },
}

// statusWidth and reasonWidth fit every status and reason word, so that a watch's STATUS
// and REASON columns stay put when a resource moves on.
var statusWidth, reasonWidth = func() (int, int) {
	s := len(statusDeleted)
	for _, st := range domain.Statuses {
		s = max(s, len(st))
	}
	r := 0
	for _, reasons := range domain.ReasonsByStatus {
		for _, reason := range reasons {
			r = max(r, len(reason))
		}
	}
	return s, r
}()

// labelsCell is the LABELS column, as kubectl prints it: a=b,c=d, or <none>.
func labelsCell(l map[string]string) string {
	if len(l) == 0 {
		return "<none>"
	}
	parts := make([]string, 0, len(l))
	for _, k := range slices.Sorted(maps.Keys(l)) {
		parts = append(parts, k+"="+l[k])
	}
	return strings.Join(parts, ",")
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
