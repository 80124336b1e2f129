// Package systemd_test checks berth.service, the agent's systemd unit, and its example
// environment file: systemd-analyze accepts the unit and rates its exposure low, and the
// flags and variables they use are the agent's.
package systemd_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/e2etest"
)

const unitFile = "berth.service"

// maxExposure is the highest overall exposure systemd-analyze security may give the unit,
// in tenths of the level it prints (0 is fully locked down, 10.0 unprotected): 2.0, where
// the unit rated 1.2 when this was written, the rest for a network service, which needs the
// network and its sockets.
const maxExposure = 20

// TestUnitVerifies runs systemd-analyze verify on the unit as it is installed, in a root of
// its own holding the system's units, the agent at ExecStart's path and the programs the
// other Exec lines name: verify must print nothing (it only warns of an unknown or invalid
// setting, and still exits 0), and systemd-analyze security must rate the unit at most
// maxExposure.
func TestUnitVerifies(t *testing.T) {
	analyze := systemdAnalyze(t)
	root := t.TempDir()
	units := systemUnitDir(t)
	mustMkdir(t, filepath.Join(root, filepath.Dir(units)))
	if out, err := exec.Command("cp", "-a", units, filepath.Join(root, units)).CombinedOutput(); err != nil {
		t.Fatalf("copy the system's units: %v\n%s", err, out)
	}
	unit := readUnit(t)
	for _, key := range []string{"ExecStart", "ExecReload"} {
		for _, line := range unit[key] {
			program := strings.TrimLeft(strings.Fields(line)[0], "-@:+!")
			source := program
			if program == "/usr/local/bin/berth" {
				source = e2etest.Binary(t)
			}
			installFile(t, source, filepath.Join(root, program), 0o755)
		}
	}
	installFile(t, unitFile, filepath.Join(root, "etc/systemd/system", unitFile), 0o644)

	out, err := exec.Command(analyze, "verify", "--root="+root, unitFile).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unitFile, err, out)
	}
	out, err = exec.Command(analyze, "security", "--offline=yes", "--threshold="+strconv.Itoa(maxExposure), "--root="+root, unitFile).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze security rates %s above %.1f: %v\n%s", unitFile, float64(maxExposure)/10, err, out)
	}
}

// TestUnitUsesTheAgentsFlags: every flag ExecStart passes is one berth run has, every
// variable the example environment file sets or shows is one berth reads, the example's
// database URL is commented out (so it holds no credential to copy), and the embedded store
// lands in the unit's state directory.
func TestUnitUsesTheAgentsFlags(t *testing.T) {
	berth := e2etest.Binary(t)
	unit := readUnit(t)
	runHelp := output(t, berth, "run", "--help")
	rootHelp := output(t, berth, "--help")

	if len(unit["ExecStart"]) != 1 {
		t.Fatalf("%s has %d ExecStart lines, want 1", unitFile, len(unit["ExecStart"]))
	}
	args := strings.Fields(unit["ExecStart"][0])
	if args[0] != "/usr/local/bin/berth" || len(args) < 2 || args[1] != "run" {
		t.Fatalf("ExecStart=%s, want /usr/local/bin/berth run ...", unit["ExecStart"][0])
	}
	for _, arg := range args[2:] {
		if flag, ok := strings.CutPrefix(arg, "--"); ok && !strings.Contains(runHelp, "--"+flag+" ") {
			t.Errorf("ExecStart passes --%s, which berth run --help does not list", flag)
		}
	}

	example, err := os.ReadFile("berth.env.example")
	if err != nil {
		t.Fatal(err)
	}
	setting := regexp.MustCompile(`(?m)^(#?)([A-Z_][A-Z0-9_]*)=(.*)$`)
	seen := map[string]bool{}
	for _, m := range setting.FindAllStringSubmatch(string(example), -1) {
		commented, name, value := m[1] == "#", m[2], m[3]
		seen[name] = true
		if !strings.Contains(rootHelp, name) && !strings.Contains(runHelp, name) {
			t.Errorf("berth.env.example sets %s, which neither berth --help nor berth run --help names", name)
		}
		if strings.Contains(value, "://") && !commented {
			t.Errorf("berth.env.example sets %s to a URL; leave it commented out, as an example to fill in", name)
		}
	}
	if !seen["BERTH_DATABASE_URL"] {
		t.Error("berth.env.example does not show BERTH_DATABASE_URL, the setting it is for")
	}

	// StateDirectory=berth is %S/berth; XDG_STATE_HOME=%S puts the embedded store there.
	if got := unit["StateDirectory"]; len(got) != 1 || got[0] != "berth" {
		t.Errorf("StateDirectory=%v, want berth", got)
	}
	if !contains(unit["Environment"], "XDG_STATE_HOME=%S") {
		t.Errorf("Environment=%v lacks XDG_STATE_HOME=%%S", unit["Environment"])
	}
	state := t.TempDir()
	migrate := exec.Command(berth, "migrate")
	migrate.Env = append(os.Environ(), "XDG_STATE_HOME="+state, "BERTH_DATABASE_URL=")
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("berth migrate on the embedded store: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(state, "berth", "berth.db")); err != nil {
		t.Errorf("with XDG_STATE_HOME=%s the embedded store is not in its berth directory: %v", state, err)
	}
}

// systemdAnalyze finds systemd-analyze. Where it is missing the test fails: an unchecked
// unit proves nothing (.ci/run installs it).
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze is not installed, so the unit cannot be checked (on Debian: apt-get install systemd): %v", err)
	}
	return path
}

// systemUnitDir is where the system's own units are (sysinit.target and the like, which the
// unit's default dependencies name).
func systemUnitDir(t *testing.T) string {
	t.Helper()
	for _, dir := range []string{"/usr/lib/systemd/system", "/lib/systemd/system"} {
		if _, err := os.Stat(filepath.Join(dir, "sysinit.target")); err == nil {
			return dir
		}
	}
	t.Fatal("no directory of systemd's units (with sysinit.target) in /usr/lib/systemd/system or /lib/systemd/system")
	return ""
}

// readUnit reads the unit's settings, each key with its values in order.
func readUnit(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	settings := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is not KEY=VALUE", unitFile, line)
		}
		settings[key] = append(settings[key], value)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return settings
}

func installFile(t *testing.T, source, dest string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(source)
	if err != nil {
		t.Fatalf("the unit names %s: %v", dest, err)
	}
	mustMkdir(t, filepath.Dir(dest))
	if err := os.WriteFile(dest, data, mode); err != nil {
		t.Fatal(err)
	}
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func output(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func contains(values []string, want string) bool {
	for _, v := range values {
		if v == want {
			return true
		}
	}
	return false
}
