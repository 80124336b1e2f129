package external

import (
	"context"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/juju/clock/testclock"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/environtest"
)

// fakeBrokerEnv makes this test binary, started with it set, a broker of widgets on the
// socket of SocketEnv: the broker the supervisor tests start, crash and restart.
const fakeBrokerEnv = "BERTH_EXTERNAL_TEST_BROKER"

func TestMain(m *testing.M) {
	if os.Getenv(fakeBrokerEnv) == "1" {
		ln, err := net.Listen("unix", os.Getenv(SocketEnv))
		if err != nil {
			os.Stderr.WriteString("fake broker: " + err.Error() + "\n")
			os.Exit(3)
		}
		_ = http.Serve(ln, &Adapter{Env: &environtest.Environ{}, Types: []domain.ResourceType{environtest.WidgetName}})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestACrashedBrokerIsRestartedWithBackoffAndItsResourcesConverge(t *testing.T) {
	t.Setenv(fakeBrokerEnv, "1")
	clk := testclock.NewClock(time.Now())
	spec := jsonRaw(t, map[string]any{"types": []string{"widget"}, "command": []string{os.Args[0], "-test.run=^$"},
		"restart_min_seconds": 1, "restart_max_seconds": 8})
	built, err := New("ext", spec, environ.Deps{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	env := asExternal(built)
	sup := env.supervisor
	if sup.Status().Starts != 0 {
		t.Fatal("the broker started before any call needed it")
	}
	ctx := context.Background()

	sup.Start()
	first := waitListening(t, sup, 1)
	if _, err := env.Reconcile(ctx, widget("r1", 1), widgetOpts()); err != nil {
		t.Fatalf("Reconcile through the started broker: %v", err)
	}

	crash(t, sup, first)
	_, err = env.Reconcile(ctx, widget("r1", 2), widgetOpts())
	if u, ok := environ.IsUnavailable(err); !ok || u.Class != environ.UnavailableConnection || !strings.Contains(err.Error(), "broker process is down (signal: killed; 1 restarts)") {
		t.Fatalf("Reconcile while the broker is down: %v; want unavailable, connection, saying how the process ended", err)
	}
	if err := env.Check(ctx); err == nil || !strings.Contains(err.Error(), "broker process is down") {
		t.Errorf("Check while the broker is down: %v; want it to say so", err)
	}
	if report := env.BrokerReport()["process"].(map[string]any); report["running"] != false || report["restarts"] != 1 {
		t.Errorf("report while down: %v; want not running, 1 restart", report)
	}
	if err := clk.WaitAdvance(time.Second, 10*time.Second, 1); err != nil {
		t.Fatal(err)
	}
	second := waitListening(t, sup, 2)
	if _, err := env.Reconcile(ctx, widget("r1", 3), widgetOpts()); err != nil {
		t.Fatalf("Reconcile after the restart: %v", err)
	}

	// The second exit in a row waits twice as long.
	crash(t, sup, second)
	if err := clk.WaitAdvance(time.Second, 10*time.Second, 1); err != nil {
		t.Fatal(err)
	}
	if st := sup.Status(); st.Running || st.Starts != 2 {
		t.Fatalf("after 1s of a 2s backoff: %+v; want still down", st)
	}
	clk.Advance(time.Second)
	waitListening(t, sup, 3)
	if err := env.Check(ctx); err != nil {
		t.Errorf("Check after the second restart: %v", err)
	}

	if err := env.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if st := sup.Status(); st.Running {
		t.Errorf("after Close the broker still runs: %+v", st)
	}
}

// crash kills the broker of pid and waits for the supervisor to see it exit.
func crash(t *testing.T, sup *supervisor, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the supervisor sees the broker exit", func() bool { return !sup.Status().Running })
}

// waitListening waits for the supervisor's starts-th broker to listen and returns its pid.
func waitListening(t *testing.T, sup *supervisor, starts int) int {
	t.Helper()
	eventually(t, "the broker listens", func() bool {
		st := sup.Status()
		if !st.Running || st.Starts != starts {
			return false
		}
		conn, err := net.Dial("unix", sup.socket)
		if err != nil {
			return false
		}
		conn.Close()
		return true
	})
	return sup.Status().PID
}

// eventually polls cond (a process's exit or its socket, which no clock announces).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting until %s", what)
}

func TestABrokerThatCannotStartIsReportedByCheck(t *testing.T) {
	spec := jsonRaw(t, map[string]any{"types": []string{"widget"}, "command": []string{"/nonexistent/broker"}})
	env, err := New("ext", spec, environ.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	var last error
	eventually(t, "Check reports the broker that cannot start", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		last = env.Check(ctx)
		return last != nil && strings.Contains(last.Error(), "broker process is down (start the broker \"/nonexistent/broker\"")
	})
	if _, err := env.Reconcile(context.Background(), widget("r1", 1), widgetOpts()); err == nil || !strings.Contains(err.Error(), "broker process is down") {
		t.Errorf("Reconcile: %v; want it to say the broker process is down", err)
	}
}
