package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is the release, set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

func newVersionCommand(opts *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print Berth's version",
		Long:    "Print the release, the commit it was built from (when known) and the Go version.",
		Example: "  berth version\n  berth version -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := opts.outputFormat()
			if err != nil {
				return err
			}
			commit := "unknown"
			if info, ok := debug.ReadBuildInfo(); ok {
				for _, s := range info.Settings {
					if s.Key == "vcs.revision" {
						commit = s.Value
					}
				}
			}
			if format != outputTable {
				return writeData(cmd.OutOrStdout(), format, map[string]string{"version": version, "commit": commit, "go": runtime.Version()})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "berth %s (commit %s, %s)\n", version, commit, runtime.Version())
			return err
		},
	}
}
