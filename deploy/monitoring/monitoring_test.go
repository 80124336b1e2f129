// Package monitoring_test checks Berth's dashboard and alert rules: promtool accepts the
// rules and their unit tests pass (every alert has a case that fires and one that stays
// quiet), the PrometheusRule holds the rules file's groups unchanged, every query of the
// dashboard parses, the kustomize component renders with the base, the README explains
// every alert, and every metric the dashboard and the rules use is one a running agent
// serves (agent_test.go).
package monitoring_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const (
	rulesFile          = "rules.yml"
	rulesTestFile      = "rules_test.yml"
	prometheusRuleFile = "prometheusrule.yaml"
	dashboardFile      = "dashboard.json"
	readmeFile         = "../../README.md"
	baseDir            = "../kubernetes"
)

// ruleGroups is a Prometheus rules file, as far as the tests read it.
type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

type rule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// alerts is every alerting rule of the rules file.
func (g ruleGroups) alerts() []rule {
	var out []rule
	for _, group := range g.Groups {
		for _, r := range group.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

// promtool is Prometheus's promtool, which Debian's prometheus package installs.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not installed: install Debian's prometheus package (apt-get install prometheus), which provides it, to check the alert rules (%v)", err)
	}
	return path
}

// readYAML decodes a YAML file into v through its JSON form, so json tags apply.
func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, v); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
}

func readRules(t *testing.T) ruleGroups {
	t.Helper()
	var g ruleGroups
	readYAML(t, rulesFile, &g)
	if len(g.alerts()) == 0 {
		t.Fatalf("%s has no alerts", rulesFile)
	}
	return g
}

// TestRulesPassPromtool: promtool checks the rules file and runs its unit tests.
func TestRulesPassPromtool(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTestFile}} {
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestEveryAlertIsTested: each alert has a unit test in which it fires and one in which it
// stays quiet, a severity, a summary and a description; the unit tests name no other alert.
func TestEveryAlertIsTested(t *testing.T) {
	var tests struct {
		RuleFiles []string `json:"rule_files"`
		Tests     []struct {
			AlertRuleTest []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	var raw map[string]any
	readYAML(t, rulesTestFile, &raw)
	encoded, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(encoded, &tests); err != nil {
		t.Fatalf("decode %s: %v", rulesTestFile, err)
	}
	if !slices.Equal(tests.RuleFiles, []string{rulesFile}) {
		t.Errorf("%s tests rule files %v, want [%s]", rulesTestFile, tests.RuleFiles, rulesFile)
	}
	fires, quiet := map[string]int{}, map[string]int{}
	for _, test := range tests.Tests {
		for _, c := range test.AlertRuleTest {
			if len(c.ExpAlerts) > 0 {
				fires[c.Alertname]++
			} else {
				quiet[c.Alertname]++
			}
		}
	}
	known := map[string]bool{}
	for _, a := range readRules(t).alerts() {
		known[a.Alert] = true
		if fires[a.Alert] == 0 {
			t.Errorf("%s: no case of %s expects it to fire", a.Alert, rulesTestFile)
		}
		if quiet[a.Alert] == 0 {
			t.Errorf("%s: no case of %s expects it to stay quiet", a.Alert, rulesTestFile)
		}
		if s := a.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", a.Alert, s)
		}
		for _, key := range []string{"summary", "description"} {
			if strings.TrimSpace(a.Annotations[key]) == "" {
				t.Errorf("%s: no %s annotation", a.Alert, key)
			}
		}
	}
	for name := range mergeKeys(fires, quiet) {
		if !known[name] {
			t.Errorf("%s tests alert %s, which %s does not have", rulesTestFile, name, rulesFile)
		}
	}
}

func mergeKeys(maps ...map[string]int) map[string]bool {
	out := map[string]bool{}
	for _, m := range maps {
		for k := range m {
			out[k] = true
		}
	}
	return out
}

// TestPrometheusRuleMatchesRulesFile: the PrometheusRule's spec.groups are the rules file's
// groups, so Prometheus with and without the operator alerts alike.
func TestPrometheusRuleMatchesRulesFile(t *testing.T) {
	var file, object map[string]any
	readYAML(t, rulesFile, &file)
	readYAML(t, prometheusRuleFile, &object)
	if object["apiVersion"] != "monitoring.coreos.com/v1" || object["kind"] != "PrometheusRule" {
		t.Fatalf("%s is %v %v, want monitoring.coreos.com/v1 PrometheusRule", prometheusRuleFile, object["apiVersion"], object["kind"])
	}
	spec, _ := object["spec"].(map[string]any)
	if len(spec) != 1 {
		t.Errorf("%s's spec has %d fields, want groups only", prometheusRuleFile, len(spec))
	}
	if len(file) != 1 {
		t.Errorf("%s has %d top-level fields, want groups only", rulesFile, len(file))
	}
	if !reflect.DeepEqual(spec["groups"], file["groups"]) {
		got, _ := json.MarshalIndent(spec["groups"], "", "  ")
		want, _ := json.MarshalIndent(file["groups"], "", "  ")
		t.Errorf("%s's spec.groups differ from %s's groups: change both alike\n%s:\n%s\n%s:\n%s",
			prometheusRuleFile, rulesFile, prometheusRuleFile, got, rulesFile, want)
	}
}

// dashboard is the Grafana dashboard, as far as the tests read it.
type dashboard struct {
	UID    string  `json:"uid"`
	Title  string  `json:"title"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID         int               `json:"id"`
	Type       string            `json:"type"`
	Title      string            `json:"title"`
	Datasource map[string]string `json:"datasource"`
	Targets    []struct {
		Expr       string            `json:"expr"`
		Datasource map[string]string `json:"datasource"`
	} `json:"targets"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("decode %s: %v", dashboardFile, err)
	}
	return d
}

// exprs is every query of the dashboard's panels.
func (d dashboard) exprs() []string {
	var out []string
	for _, p := range d.Panels {
		for _, target := range p.Targets {
			out = append(out, target.Expr)
		}
	}
	return out
}

// grafanaVariable is Grafana's interval variable in a query; promtool parses its stand-in.
var grafanaVariable = regexp.MustCompile(`\$__(rate_)?interval`)

// TestDashboardQueriesParse: every panel has a unique id, a title and the dashboard's data
// source variable; every query parses as PromQL (promtool checks it as a recording rule);
// and the panels an operator looks for are there.
func TestDashboardQueriesParse(t *testing.T) {
	bin := promtool(t)
	d := readDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("the dashboard has uid %q and title %q, want both", d.UID, d.Title)
	}
	ids := map[int]bool{}
	var recording []map[string]string
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Title == "" {
			t.Errorf("panel %d has no title", p.ID)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for i, target := range p.Targets {
			for _, ds := range []map[string]string{p.Datasource, target.Datasource} {
				if ds["uid"] != "${datasource}" {
					t.Errorf("panel %q: data source %v, want the ${datasource} variable", p.Title, ds)
				}
			}
			recording = append(recording, map[string]string{
				"record": fmt.Sprintf("panel_%d_query_%d", p.ID, i),
				"expr":   grafanaVariable.ReplaceAllString(target.Expr, "5m"),
			})
		}
	}
	raw, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": recording}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "check", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("the dashboard's queries do not parse: %v\n%s", err, out)
	}

	used := metricNames(d.exprs()...)
	for _, want := range []string{
		"berth_capacity_used", "berth_capacity_total", "berth_resources", "berth_create_to_ready_seconds_bucket",
		"berth_health_checks_total", "berth_lease_takeovers_total", "berth_agents_live", "berth_agent_leader",
		"berth_reconcile_total",
	} {
		if !used[want] {
			t.Errorf("no panel shows %s", want)
		}
	}
}

// metricName is a Berth metric's name in a query.
var metricName = regexp.MustCompile(`\bberth_[a-z0-9_]+\b`)

// metricNames is every Berth metric the queries name.
func metricNames(exprs ...string) map[string]bool {
	out := map[string]bool{}
	for _, e := range exprs {
		for _, name := range metricName.FindAllString(e, -1) {
			out[name] = true
		}
	}
	return out
}

// usedMetrics is every Berth metric the dashboard and the rules use, sorted.
func usedMetrics(t *testing.T) []string {
	t.Helper()
	exprs := readDashboard(t).exprs()
	for _, a := range readRules(t).alerts() {
		exprs = append(exprs, a.Expr)
	}
	var names []string
	for name := range metricNames(exprs...) {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// nextHeading is a heading of level 2 or 3, where the Monitoring section ends; the "# ..."
// comment of its code block is none.
var nextHeading = regexp.MustCompile(`\n##+ [^\n]*\n`)

// TestReadmeExplainsEveryAlert: the README's Monitoring section names every alert.
func TestReadmeExplainsEveryAlert(t *testing.T) {
	raw, err := os.ReadFile(readmeFile)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	start := strings.Index(readme, "\n### Monitoring\n")
	if start < 0 {
		t.Fatalf("%s has no \"### Monitoring\" section", readmeFile)
	}
	section := readme[start+1:]
	if end := nextHeading.FindStringIndex(section); end != nil {
		section = section[:end[0]]
	}
	for _, a := range readRules(t).alerts() {
		if !strings.Contains(section, "`"+a.Alert+"`") {
			t.Errorf("the README's Monitoring section does not explain `%s`", a.Alert)
		}
	}
}
