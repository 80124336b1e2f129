package main

import (
	"fmt"
	"os"
	"time"

	"github.com/juju/clock"
	"github.com/spf13/cobra"
)

// Environment variables that stand in for the global flags; a flag given on the command line
// beats its variable.
const (
	envDatabaseURL        = "BERTH_DATABASE_URL"
	envProvisionerSetJSON = "BERTH_PROVISIONER_SET_JSON"
	envDefaultProvisioner = "BERTH_DEFAULT_PROVISIONER"
	envLogLevel           = "BERTH_LOG_LEVEL"
)

// Output formats of -o/--output.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// defaultPollInterval is how often --wait re-reads a resource.
const defaultPollInterval = time.Second

// globalOptions are the persistent flags every subcommand shares, with their environment
// variables already applied.
type globalOptions struct {
	databaseURL        string // --database-url, env BERTH_DATABASE_URL
	provisionersFile   string // --provisioners FILE; else env BERTH_PROVISIONER_SET_JSON holds the JSON itself
	defaultProvisioner string // --default-provisioner, env BERTH_DEFAULT_PROVISIONER
	logLevel           string // --log-level debug|info|warn|error (env BERTH_LOG_LEVEL), default info
	output             string // -o/--output: table (default) | json

	clock        clock.Clock   // drives --wait polling and timeouts
	pollInterval time.Duration // how often --wait re-reads a resource
}

func newRootCommand() *cobra.Command {
	return newRootCommandWith(&globalOptions{clock: clock.WallClock, pollInterval: defaultPollInterval})
}

// newRootCommandWith builds the command tree around opts, whose clock and poll interval must
// be set; the flag fields are filled from the environment and then the command line.
func newRootCommandWith(opts *globalOptions) *cobra.Command {
	root := &cobra.Command{
		Use:   "berth",
		Short: "Berth provisions resources (runtimes, ClickHouse databases) on a pool of hosts",
		Long: `Berth keeps resources in a PostgreSQL table and an agent (berth run) reconciles each one
through its provisioner. The other commands read and write that table directly, so they work
while the agent is down; the agent picks up every change.

Global flags have environment variables; a flag beats its variable:
  --database-url          BERTH_DATABASE_URL
  --provisioners FILE     BERTH_PROVISIONER_SET_JSON (the JSON itself, not a file name)
  --default-provisioner   BERTH_DEFAULT_PROVISIONER
  --log-level             BERTH_LOG_LEVEL`,
		Example: `  export BERTH_DATABASE_URL=postgres://berth@db.internal:5432/berth
  berth migrate
  berth resource create --type runtime --name analytics --owner acme --arg slots=2 --wait
  berth resource list -o json`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w (see `%s --help`)", err, cmd.CommandPath())
	})

	flags := root.PersistentFlags()
	flags.StringVar(&opts.databaseURL, "database-url", "", "PostgreSQL URL of Berth's database (env "+envDatabaseURL+")")
	flags.StringVar(&opts.provisionersFile, "provisioners", "", "file holding the provisioner set JSON (else env "+envProvisionerSetJSON+" holds the JSON)")
	flags.StringVar(&opts.defaultProvisioner, "default-provisioner", "", "provisioner for resources that name none (env "+envDefaultProvisioner+"; optional when the set has one)")
	flags.StringVar(&opts.logLevel, "log-level", "info", "log level: debug, info, warn or error (env "+envLogLevel+")")
	flags.StringVarP(&opts.output, "output", "o", outputTable, "output format: table or json (json also makes logs JSON)")
	// Set after the flags are defined, so that help never shows a variable's value (a
	// database URL may carry a password) and the command line still overrides it.
	opts.applyEnv(os.Getenv)

	root.AddCommand(
		newRunCommand(opts),
		newMigrateCommand(opts),
		newCheckConfigCommand(opts),
		newResourceCommand(opts),
		newCapacityCommand(opts),
		newVersionCommand(opts),
		newStatusCommand(opts),
	)
	return root
}

// applyEnv fills the flag fields from the environment; empty variables count as unset.
func (o *globalOptions) applyEnv(getenv func(string) string) {
	if v := getenv(envDatabaseURL); v != "" {
		o.databaseURL = v
	}
	if v := getenv(envDefaultProvisioner); v != "" {
		o.defaultProvisioner = v
	}
	if v := getenv(envLogLevel); v != "" {
		o.logLevel = v
	}
}
