// Package e2e drives the real berth binary against a real PostgreSQL: it creates, resizes and
// deletes resources through the CLI and direct SQL, kills the agent with SIGKILL mid-run,
// restarts it, and checks that everything converges with nothing leaked or held twice.
//
// The binary is BERTH_BINARY when set (make test sets it); otherwise the test builds it.
package e2e
