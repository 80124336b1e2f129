package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/util/jsonpath"
)

// The -o values beyond table, json and yaml, on the commands that print lists (kubectl's).
const (
	outputWide     = "wide"     // the table with more columns
	outputName     = "name"     // KIND/NAME, one a line
	outputJSONPath = "jsonpath" // -o jsonpath=TEMPLATE over the -o json view
)

// printHelp explains the output flags in the help of the commands that take them.
const printHelp = `Output: -o wide adds columns; -o name prints KIND/NAME one a line (for resources
TYPE/NAME, e.g. runtime/hello: a name is unique per owner and type, as a Kubernetes name is
per namespace and kind); -o jsonpath=TEMPLATE prints a Kubernetes JSONPath template over
what -o json prints (a list's root is the JSON array: '{[*].name}', or
'{range [*]}{.id}{"\n"}{end}'). --sort-by takes a JSONPath into one -o json item
(.created_at, .name, {.args.slots}): numbers sort as numbers, times as times, missing
values first. --no-headers leaves out the header line. AGE columns use kubectl's short
durations (5s, 3m, 2d).`

// printFlags are the output flags of the commands that print lists.
type printFlags struct {
	noHeaders  bool
	showLabels bool
	sortBy     string
}

// printer is what -o and the print flags ask of one command.
type printer struct {
	format   string             // one of the output* constants
	template *jsonpath.JSONPath // -o jsonpath=TEMPLATE, parsed
	printFlags
}

// addPrintFlags registers --no-headers and --sort-by, and --show-labels when the command's
// items have labels.
func addPrintFlags(cmd *cobra.Command, f *printFlags, labels bool) {
	cmd.Flags().BoolVar(&f.noHeaders, "no-headers", false, "leave out the table's header line")
	cmd.Flags().StringVar(&f.sortBy, "sort-by", "", "sort by a JSONPath into the -o json item, e.g. --sort-by .created_at")
	if labels {
		cmd.Flags().BoolVar(&f.showLabels, "show-labels", false, "add a LABELS column to the table")
	}
}

// printerFor parses -o for cmd, which takes the given formats; its error lists them.
func (o *globalOptions) printerFor(cmd *cobra.Command, f printFlags, formats ...string) (printer, error) {
	format, tmpl, _ := strings.Cut(o.output, "=")
	if !slices.Contains(formats, format) || (format == outputJSONPath) != strings.Contains(o.output, "=") {
		valid := make([]string, len(formats))
		for i, name := range formats {
			valid[i] = name
			if name == outputJSONPath {
				valid[i] = "jsonpath=TEMPLATE"
			}
		}
		return printer{}, usageError(fmt.Errorf("-o/--output: %q is not an output format of %s: use one of %s", o.output, cmd.CommandPath(), strings.Join(valid, ", ")))
	}
	p := printer{format: format, printFlags: f}
	if format == outputJSONPath {
		if strings.TrimSpace(tmpl) == "" {
			return printer{}, usageError(errors.New("-o jsonpath=: the template is empty: give one, e.g. -o jsonpath='{.id}'"))
		}
		// As kubectl: a key one item lacks (an omitted unreadable, say) prints as nothing.
		p.template = jsonpath.New("output").AllowMissingKeys(true)
		if err := p.template.Parse(tmpl); err != nil {
			return printer{}, usageError(fmt.Errorf("-o jsonpath: %v: fix the template, e.g. -o jsonpath='{.id}'", err))
		}
	}
	if p.sortBy != "" {
		if _, err := parseSortBy(p.sortBy); err != nil {
			return printer{}, err
		}
	}
	return p, nil
}

// column is one column of a table of items of type T.
type column[T any] struct {
	header string
	// wide: only with -o wide; labels: with -o wide or --show-labels.
	wide, labels bool
	// aging: the cell changes as time passes, so a watch does not count it as a change.
	aging bool
	// minWidth keeps a watch's rows aligned when later values are longer than the first
	// page's (a status word, an age); a table printed once needs none.
	minWidth int
	cell     func(item T, now time.Time) string
}

// listing is how one command prints its items.
type listing[T any] struct {
	columns []column[T]
	view    func(T) any    // the -o json view of one item
	name    func(T) string // -o name (KIND/NAME); nil when the command has none
}

// visible is the columns p shows.
func (l listing[T]) visible(p printer) []column[T] {
	var cols []column[T]
	for _, c := range l.columns {
		wide := p.format == outputWide
		if (c.wide && !wide) || (c.labels && !wide && !p.showLabels) {
			continue
		}
		cols = append(cols, c)
	}
	return cols
}

// sort orders items by --sort-by, keeping the order of equal ones.
func (l listing[T]) sort(p printer, items []T) error {
	if p.sortBy == "" || len(items) < 2 {
		return nil
	}
	path, err := parseSortBy(p.sortBy)
	if err != nil {
		return err
	}
	keys := make([]any, len(items))
	found := false
	for i, item := range items {
		v, err := jsonView(l.view(item))
		if err != nil {
			return err
		}
		if keys[i], err = lookup(path, v); err == nil {
			found = true
		}
	}
	if !found {
		return usageError(fmt.Errorf("--sort-by: %q names no field of the items: use a JSONPath into what -o json prints, e.g. --sort-by .created_at", p.sortBy))
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return compareJSON(keys[a], keys[b]) })
	sorted := make([]T, len(items))
	for i, j := range idx {
		sorted[i] = items[j]
	}
	copy(items, sorted)
	return nil
}

// print prints items as p says: sorted, then a table, names, a JSON or YAML array, or the
// template over that array.
func (l listing[T]) print(w io.Writer, p printer, items []T, now time.Time) error {
	if err := l.sort(p, items); err != nil {
		return err
	}
	switch p.format {
	case outputTable, outputWide:
		cols := l.visible(p)
		rows := l.rows(cols, items, now)
		a := newAligner(cols, p, rows, false)
		var buf bytes.Buffer
		if !p.noHeaders {
			buf.WriteString(a.line(headers(cols)))
		}
		for _, row := range rows {
			buf.WriteString(a.line(row))
		}
		_, err := w.Write(buf.Bytes())
		return err
	case outputName:
		var buf bytes.Buffer
		for _, item := range items {
			buf.WriteString(l.name(item) + "\n")
		}
		_, err := w.Write(buf.Bytes())
		return err
	}
	views := make([]any, len(items))
	for i, item := range items {
		views[i] = l.view(item)
	}
	return p.data(w, views)
}

// printOne prints one item in a form other than a table: an object rather than an array.
func (l listing[T]) printOne(w io.Writer, p printer, item T, now time.Time) error {
	switch p.format {
	case outputTable, outputWide:
		return l.print(w, p, []T{item}, now)
	case outputName:
		_, err := fmt.Fprintln(w, l.name(item))
		return err
	}
	return p.data(w, l.view(item))
}

// data prints v as -o json, yaml or jsonpath says.
func (p printer) data(w io.Writer, v any) error {
	if p.format != outputJSONPath {
		return writeData(w, p.format, v)
	}
	generic, err := jsonView(v)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := p.template.Execute(&buf, generic); err != nil {
		return usageError(fmt.Errorf("-o jsonpath: %v: the template must match what -o json prints", err))
	}
	_, err = w.Write(buf.Bytes())
	return err
}

func (l listing[T]) rows(cols []column[T], items []T, now time.Time) [][]string {
	rows := make([][]string, len(items))
	for i, item := range items {
		rows[i] = make([]string, len(cols))
		for j, c := range cols {
			rows[i][j] = tableText(c.cell(item, now))
		}
	}
	return rows
}

func headers[T any](cols []column[T]) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.header
	}
	return out
}

// aligner pads cells to column widths that only grow: from the header, the first rows and,
// for a watch, each column's minimum, so that rows printed later line up with the first.
type aligner struct {
	widths []int
}

func newAligner[T any](cols []column[T], p printer, rows [][]string, minimums bool) *aligner {
	a := &aligner{widths: make([]int, len(cols))}
	for i, c := range cols {
		if minimums {
			a.widths[i] = c.minWidth
		}
		if !p.noHeaders {
			a.widths[i] = max(a.widths[i], utf8.RuneCountInString(c.header))
		}
	}
	for _, row := range rows {
		a.fit(row)
	}
	return a
}

// fit widens the columns row does not fit in.
func (a *aligner) fit(row []string) {
	for i, cell := range row {
		a.widths[i] = max(a.widths[i], utf8.RuneCountInString(cell))
	}
}

// line is row padded to the widths (two spaces between columns), the last cell as it is.
func (a *aligner) line(row []string) string {
	var b strings.Builder
	for i, cell := range row {
		b.WriteString(cell)
		if i < len(row)-1 {
			b.WriteString(strings.Repeat(" ", a.widths[i]-utf8.RuneCountInString(cell)+2))
		}
	}
	b.WriteString("\n")
	return b.String()
}

// ageCell is how long before now t was, in kubectl's short form ("5s", "3m", "2d").
func ageCell(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(max(now.Sub(t), 0))
}

// ageWidth fits every age HumanDuration prints below two years ("7d23h").
const ageWidth = 5

// jsonView is v as encoding/json sees it (maps, slices, json.Number, strings, bools, nil),
// the shape JSONPath walks.
func jsonView(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out any
	return out, dec.Decode(&out)
}

// parseSortBy accepts kubectl's relaxed forms: .a.b, a.b and {.a.b}.
func parseSortBy(s string) (*jsonpath.JSONPath, error) {
	expr := strings.TrimSpace(s)
	if !strings.HasPrefix(expr, "{") {
		expr = "{." + strings.TrimPrefix(expr, ".") + "}"
	}
	path := jsonpath.New("sort-by")
	if err := path.Parse(expr); err != nil {
		return nil, usageError(fmt.Errorf("--sort-by: %q is not a JSONPath: %v (e.g. --sort-by .created_at)", s, err))
	}
	return path, nil
}

// lookup is the first value path finds in v.
func lookup(path *jsonpath.JSONPath, v any) (any, error) {
	results, err := path.FindResults(v)
	if err != nil {
		return nil, err
	}
	if len(results) == 0 || len(results[0]) == 0 {
		return nil, errors.New("no value")
	}
	rv := results[0][0]
	if !rv.IsValid() || !rv.CanInterface() {
		return nil, nil
	}
	return rv.Interface(), nil
}

// compareJSON orders JSON values: missing and null first, then by kind (false before true,
// numbers by value, RFC 3339 times by time, other strings by text, the rest by their JSON).
func compareJSON(a, b any) int {
	ra, rb := jsonRank(a), jsonRank(b)
	if ra != rb {
		return ra - rb
	}
	switch x := a.(type) {
	case nil:
		return 0
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case json.Number:
		fx, _ := x.Float64()
		fy, _ := b.(json.Number).Float64()
		switch {
		case fx < fy:
			return -1
		case fx > fy:
			return 1
		}
		return 0
	case string:
		y := b.(string)
		tx, errX := time.Parse(time.RFC3339Nano, x)
		ty, errY := time.Parse(time.RFC3339Nano, y)
		if errX == nil && errY == nil {
			return tx.Compare(ty)
		}
		return strings.Compare(x, y)
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Compare(ja, jb)
}

func jsonRank(v any) int {
	switch v.(type) {
	case nil:
		return 0
	case bool:
		return 1
	case json.Number:
		return 2
	case string:
		return 3
	}
	return 4
}
