package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/domain"
)

// maxCompleted bounds how many resources a completion reads from the database.
const maxCompleted = 1000

// addCompletions teaches the shell completion (berth completion bash|zsh|fish) Berth's
// arguments and flag values: every command whose first argument is a resource (its Use says
// ID|NAME) completes resource ids from the database, each described by its name, type,
// owner and status, and names too once a few letters are typed; -o, --log-level, --type
// and --status complete their fixed values and --owner the owners in the database.
func addCompletions(root *cobra.Command, opts *globalOptions) {
	mustRegister(root, "output", cobra.FixedCompletions([]cobra.Completion{outputTable, outputJSON, outputYAML, outputWide, outputName, outputJSONPath + "="}, cobra.ShellCompDirectiveNoFileComp))
	mustRegister(root, "log-level", cobra.FixedCompletions([]cobra.Completion{"debug", "info", "warn", "error"}, cobra.ShellCompDirectiveNoFileComp))
	served := opts.catalog().TypeNames()
	types := make([]cobra.Completion, len(served))
	for i, t := range served {
		types[i] = string(t)
	}
	statuses := make([]cobra.Completion, len(domain.Statuses))
	for i, s := range domain.Statuses {
		statuses[i] = string(s)
	}
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		if use := strings.Fields(cmd.Use); len(use) > 1 && strings.HasPrefix(use[1], "ID") && cmd.ValidArgsFunction == nil {
			cmd.ValidArgsFunction = completeResources(opts)
		}
		local := cmd.LocalNonPersistentFlags()
		for name, complete := range map[string]cobra.CompletionFunc{
			"type":   cobra.FixedCompletions(types, cobra.ShellCompDirectiveNoFileComp),
			"status": cobra.FixedCompletions(statuses, cobra.ShellCompDirectiveNoFileComp),
			"owner":  completeOwners(opts),
		} {
			if local.Lookup(name) != nil {
				mustRegister(cmd, name, complete)
			}
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)
	writeScriptsToCommandOutput(root)
}

// scriptGenerators are cobra's generators of each shell's completion script.
var scriptGenerators = map[string]func(root *cobra.Command, w io.Writer, descriptions bool) error{
	"bash": func(root *cobra.Command, w io.Writer, descriptions bool) error {
		return root.GenBashCompletionV2(w, descriptions)
	},
	"zsh": func(root *cobra.Command, w io.Writer, descriptions bool) error {
		if descriptions {
			return root.GenZshCompletion(w)
		}
		return root.GenZshCompletionNoDesc(w)
	},
	"fish": func(root *cobra.Command, w io.Writer, descriptions bool) error {
		return root.GenFishCompletion(w, descriptions)
	},
	"powershell": func(root *cobra.Command, w io.Writer, descriptions bool) error {
		if descriptions {
			return root.GenPowerShellCompletionWithDesc(w)
		}
		return root.GenPowerShellCompletion(w)
	},
}

// writeScriptsToCommandOutput makes `berth completion SHELL` write its script to the
// command's output, as every other command does: cobra's own commands write to the output
// the root had when they were made.
func writeScriptsToCommandOutput(root *cobra.Command) {
	for _, cmd := range root.Commands() {
		if cmd.Name() != "completion" {
			continue
		}
		for _, shell := range cmd.Commands() {
			generate, ok := scriptGenerators[shell.Name()]
			if !ok {
				continue
			}
			shell.Run = nil
			shell.RunE = func(cmd *cobra.Command, _ []string) error {
				noDescriptions, err := cmd.Flags().GetBool("no-descriptions")
				if err != nil {
					return err
				}
				return generate(cmd.Root(), cmd.OutOrStdout(), !noDescriptions)
			}
		}
	}
}

// mustRegister registers a flag's completion; it fails only for a flag the command lacks
// or one registered twice, which are mistakes in this file.
func mustRegister(cmd *cobra.Command, flag string, complete cobra.CompletionFunc) {
	if err := cmd.RegisterFlagCompletionFunc(flag, complete); err != nil {
		panic(fmt.Sprintf("%s: %v", cmd.CommandPath(), err))
	}
}

// completeResources completes a command's first argument with the ids of the resources its
// --owner and --type (when given) narrow to, and with their names once toComplete is not
// empty.
func completeResources(opts *globalOptions) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var f domain.ListFilter
		if owner := cmd.Flags().Lookup("owner"); owner != nil && owner.Changed {
			f.Owner = owner.Value.String()
		}
		if typ := cmd.Flags().Lookup("type"); typ != nil && slices.Contains(opts.catalog().TypeNames(), domain.ResourceType(typ.Value.String())) {
			f.Type = domain.ResourceType(typ.Value.String())
		}
		rs, err := listForCompletion(cmd, opts, f)
		if err != nil {
			cobra.CompErrorln(err.Error())
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, r := range rs {
			if strings.HasPrefix(r.ID, toComplete) {
				out = append(out, cobra.CompletionWithDesc(r.ID, fmt.Sprintf("%s (%s of owner %q, %s)", tableText(r.Name), r.Type, tableText(r.Owner), r.Status)))
			}
		}
		if toComplete != "" {
			for _, r := range rs {
				if len(r.Name) >= len(toComplete) && strings.EqualFold(r.Name[:len(toComplete)], toComplete) && !strings.ContainsAny(r.Name, " \t\n") {
					out = append(out, cobra.CompletionWithDesc(r.Name, fmt.Sprintf("%s of owner %q, %s: %s", r.Type, tableText(r.Owner), r.Status, r.ID)))
				}
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeOwners completes --owner with the owners of the resources in the database.
func completeOwners(opts *globalOptions) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		rs, err := listForCompletion(cmd, opts, domain.ListFilter{})
		if err != nil {
			cobra.CompErrorln(err.Error())
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		owners := map[string]bool{}
		for _, r := range rs {
			if r.Owner != "" && strings.HasPrefix(r.Owner, toComplete) && !strings.ContainsAny(r.Owner, " \t\n") {
				owners[r.Owner] = true
			}
		}
		return slices.Sorted(maps.Keys(owners)), cobra.ShellCompDirectiveNoFileComp
	}
}

// listForCompletion reads the first maxCompleted resources f lists from the database the
// command line names.
func listForCompletion(cmd *cobra.Command, opts *globalOptions, f domain.ListFilter) ([]domain.Resource, error) {
	f.Limit = maxCompleted
	var rs []domain.Resource
	err := opts.withService(cmd.Context(), func(svc *domain.Service) error {
		var err error
		rs, err = svc.List(cmd.Context(), f)
		return err
	})
	return rs, err
}
