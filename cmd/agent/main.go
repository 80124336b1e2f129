// Command berth is Berth's agent and its command-line client: `berth run` starts the agent that
// reconciles the resources table, and the other subcommands manage resources, check a
// provisioner set and migrate the database directly (they work while the agent is down).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "berth: %v\n", err)
		os.Exit(1)
	}
}
