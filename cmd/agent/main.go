// Command berth is Berth's agent and its command-line client: `berth run` starts the agent that
// reconciles the resources table, and the other subcommands manage resources, check a
// provisioner set and migrate the database directly (they work while the agent is down).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/berth-dev/berth/domain"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	interrupted := ctx.Err() != nil // read before stop, which ends ctx too
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "berth: %v\n", err)
		if interrupted {
			os.Exit(exitInterrupted)
		}
		os.Exit(exitCode(err))
	}
}

// Exit codes, the same for every command, so that a script can tell a failed resource from
// a timeout or a typo (rootExitCodes documents them).
const (
	exitOK       = 0
	exitFailed   = 1 // the resource --wait waited for failed, or was deleted meanwhile
	exitUsage    = 2 // bad flags or arguments: nothing was done
	exitTimedOut = 3 // --timeout passed before the resource got where --wait wanted it
	exitNotFound = 4 // the resource (or another named thing) does not exist
	exitOther    = 5 // anything else: the database unreachable, a conflicting change, ...
	// exitInterrupted is the shells' code for a command ended by SIGINT: the signal's
	// number plus 128.
	exitInterrupted = 130
)

// exitError carries the exit code berth ends with when err ends the command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError marks err as the user's mistake in flags or arguments (exit code 2).
func usageError(err error) error { return &exitError{code: exitUsage, err: err} }

// failedError marks err as the failure of the resource a wait waited for (exit code 1).
func failedError(err error) error { return &exitError{code: exitFailed, err: err} }

// exitCode maps the error a command ended with to berth's exit code: the code it carries,
// else 4 for a missing resource, 2 for a field the store refused as given, 5 for the rest.
func exitCode(err error) int {
	var (
		coded *exitError
		field *domain.FieldError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &coded):
		return coded.code
	case errors.Is(err, domain.ErrNotFound):
		return exitNotFound
	case errors.As(err, &field):
		return exitUsage
	default:
		return exitOther
	}
}
