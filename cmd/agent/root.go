package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/juju/clock"
	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/environ"
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
	outputYAML  = "yaml"
)

// defaultPollInterval is how often --wait and --watch read the resources' history without a
// wake-up (which may be lost): they follow the history as it is recorded, and this is only
// the fallback. It does not delay --timeout, which ends a wait on its own timer.
const defaultPollInterval = 5 * time.Second

// globalOptions are the persistent flags every subcommand shares, with their environment
// variables already applied.
type globalOptions struct {
	databaseURL        string // --database-url, env BERTH_DATABASE_URL
	provisionersFile   string // --provisioners FILE; else env BERTH_PROVISIONER_SET_JSON holds the JSON itself
	defaultProvisioner string // --default-provisioner, env BERTH_DEFAULT_PROVISIONER
	logLevel           string // --log-level debug|info|warn|error (env BERTH_LOG_LEVEL), default info
	output             string // -o/--output: table (default) | json | yaml

	clock        clock.Clock   // drives --wait and --watch rechecks and timeouts
	pollInterval time.Duration // see defaultPollInterval
	types        *environ.Catalog
	typesFile    *string // the --provisioners types was built for; nil for a test's own
}

// catalog returns the resource types the agent serves: the catalog of the registry berth
// run builds (newRegistryFor the provisioner set, when one is given), unless a test gave
// opts its own.
// The commands' help is built before the flags are parsed: a catalog built then is built
// again once --provisioners names a set, whose external provisioners may declare types.
func (o *globalOptions) catalog() *environ.Catalog {
	if o.types == nil || (o.typesFile != nil && *o.typesFile != o.provisionersFile) {
		setJSON, _, _ := o.provisionerSetJSON()
		o.types = newRegistryFor(setJSON).Catalog()
		file := o.provisionersFile
		o.typesFile = &file
	}
	return o.types
}

// includeDefinedTypes adds to the catalog the types the provisioner set defines (a
// kubernetes provisioner's "types"), when a set is given, so that --type and --arg know
// them. A set that does not load adds nothing: check-config and run say what is wrong.
func (o *globalOptions) includeDefinedTypes() {
	if o.provisionersFile == "" && strings.TrimSpace(os.Getenv(envProvisionerSetJSON)) == "" {
		return
	}
	set, _, _, err := loadProvisionerSet(o, slog.New(slog.DiscardHandler))
	if err != nil {
		return
	}
	o.catalog().Include(set.Catalog)
	_ = set.Close()
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
		Long: `Berth provisions resources (runtime instances on a pool of hosts or in Kubernetes, ClickHouse
databases) and keeps them alive. Each resource is a row in Berth's database; the agent
(berth run) reconciles every row through its provisioner, with retries, across restarts. The
other commands read and write the database directly, so they work while the agent is down,
and the agent picks up every change.

The database is the one --database-url or BERTH_DATABASE_URL names (PostgreSQL, for
production and for several agents sharing one database). Without either, every command uses
the embedded database, the SQLite file $XDG_STATE_HOME/berth/berth.db (by default
~/.local/state/berth/berth.db); berth run names it in its first log line.

Quick start: the first example below, step by step in the README's "Quick start". berth
dev-hosts starts local stand-ins for runtime hosts, so nothing else needs to run.

Global flags have environment variables; a flag beats its variable:
  --database-url          BERTH_DATABASE_URL
  --provisioners FILE     BERTH_PROVISIONER_SET_JSON (the JSON itself, not a file name)
  --default-provisioner   BERTH_DEFAULT_PROVISIONER
  --log-level             BERTH_LOG_LEVEL

` + rootExitCodes,
		Example: `  # Quick start, in a clone of the repository: the agent and three stand-in hosts ...
  make run
  # ... and, in a second terminal, a runtime created, shown and deleted again
  bin/berth resource create --type runtime --name hello --owner demo --arg slots=2 --wait
  bin/berth resource get hello --owner demo
  bin/berth capacity
  bin/berth resource delete hello --owner demo --wait

  # Against a shared PostgreSQL database
  export BERTH_DATABASE_URL=postgres://berth@db.internal:5432/berth
  berth migrate
  berth resource list -o json

  # In a script: the exit code says how a wait ended (0 ready, 1 failed, 3 timed out)
  berth resource create --type runtime --name web --arg slots=2 --wait --timeout 2m --quiet`,
		// berth --version, as container and package tooling expect; berth version also
		// gives the commit and the Go version.
		Version:       version,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate("berth {{.Version}}\n")
	root.PersistentPreRun = func(*cobra.Command, []string) { opts.includeDefinedTypes() }
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError(fmt.Errorf("%w (see `%s --help`)", err, cmd.CommandPath()))
	})

	flags := root.PersistentFlags()
	flags.StringVar(&opts.databaseURL, "database-url", "", "Berth's database: postgres://... or sqlite:///PATH (env "+envDatabaseURL+"; default: an SQLite file under ~/.local/state/berth)")
	flags.StringVar(&opts.provisionersFile, "provisioners", "", "file holding the provisioner set JSON (else env "+envProvisionerSetJSON+" holds the JSON)")
	flags.StringVar(&opts.defaultProvisioner, "default-provisioner", "", "provisioner for resources that name none (env "+envDefaultProvisioner+"; optional when the set has one)")
	flags.StringVar(&opts.logLevel, "log-level", "info", "log level: debug, info, warn or error (env "+envLogLevel+")")
	flags.StringVarP(&opts.output, "output", "o", outputTable, "output format: table, json or yaml (json also makes logs JSON); lists also take wide, name and jsonpath=TEMPLATE")
	// Set after the flags are defined, so that help never shows a variable's value (a
	// database URL may carry a password) and the command line still overrides it.
	opts.applyEnv(os.Getenv)

	root.AddCommand(
		newRunCommand(opts),
		newMigrateCommand(opts),
		newMigrateStoreCommand(opts),
		newCheckConfigCommand(opts),
		newResourceCommand(opts),
		newCapacityCommand(opts),
		newVersionCommand(opts),
		newStatusCommand(opts),
		newAgentsCommand(opts),
		newOwnersCommand(opts),
		newDoctorCommand(opts),
		newAccessCommand(opts),
		newDevHostsCommand(opts),
		newQuotaCommand(opts),
		newBrokerCommand(opts),
	)
	addBuiltinCommands(root)
	addCompletions(root, opts)
	markUsageErrors(root)
	return root
}

// rootExitCodes is the root help's list of exit codes (see exitCode).
const rootExitCodes = `Exit codes, the same for every command:
  0    done (with --wait: the resource got there)
  1    the resource --wait waited for failed (its status message says why), or was deleted
  2    usage: a bad flag, argument or value; nothing was done
  3    --timeout passed before the resource got where --wait wanted it; it is kept as it is
  4    not found: no resource has that ID or name
  5    anything else: the database unreachable, a conflicting change, ...
  130  interrupted (Ctrl-C, SIGTERM) before it was done`

// markUsageErrors makes cobra's own errors usage errors (exit code 2): a command's
// arguments refused by its Args check, and an unknown subcommand. A command that only groups
// subcommands prints its help when run alone and refuses any argument, as the root does, so
// that a mistyped subcommand fails rather than printing help with exit code 0.
func markUsageErrors(cmd *cobra.Command) {
	if cmd.HasSubCommands() {
		cmd.Args = unknownCommand
		if !cmd.Runnable() {
			cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
	} else if check := cmd.Args; check != nil {
		cmd.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError(err)
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		markUsageErrors(sub)
	}
}

// unknownCommand is the Args check of a command that only groups subcommands: an argument
// is a subcommand cobra did not find, maybe mistyped.
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if suggestions := cmd.SuggestionsFor(args[0]); len(suggestions) > 0 {
		msg += fmt.Sprintf(": did you mean %s?", strings.Join(suggestions, " or "))
	}
	return usageError(fmt.Errorf("%s (see `%s --help`)", msg, cmd.CommandPath()))
}

// addBuiltinCommands adds cobra's help and completion commands now rather than at Execute,
// so that they carry examples like every other command.
func addBuiltinCommands(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	examples := map[string]string{
		"berth help":                  "  berth help\n  berth help resource create",
		"berth completion":            "  source <(berth completion bash)",
		"berth completion bash":       "  source <(berth completion bash)\n  berth completion bash > /etc/bash_completion.d/berth",
		"berth completion zsh":        "  berth completion zsh > \"${fpath[1]}/_berth\"",
		"berth completion fish":       "  berth completion fish > ~/.config/fish/completions/berth.fish",
		"berth completion powershell": "  berth completion powershell | Out-String | Invoke-Expression",
	}
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		if ex, ok := examples[cmd.CommandPath()]; ok && cmd.Example == "" {
			cmd.Example = ex
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)
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
