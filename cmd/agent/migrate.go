package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/store"
)

func newMigrateCommand(opts *globalOptions) *cobra.Command {
	var clientRole string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade Berth's database schema",
		Long: `Apply every schema migration the database lacks. It is safe to run any number of times and
while agents are running; berth run migrates on start too. The other commands never migrate:
they refuse to work on a database without Berth's schema.

A database whose schema is newer than this build knows (a newer build migrated it) is left
as it is: berth migrate fails naming both versions, and berth run starts without migrating
and claims no work until it is replaced by a build that knows the schema.

With --client-role NAME (PostgreSQL), the existing role NAME is then given exactly a
client's rights: it reads Berth's tables and inserts, updates and deletes resources, and the
database refuses its writes of the columns only the agent writes. Run it with the agent's URL
(the role that owns the tables), and again after each upgrade.`,
		Example: `  berth migrate --database-url postgres://berth@localhost:5432/berth
  BERTH_DATABASE_URL=postgres://berth@db.internal/berth berth migrate -o json
  berth migrate --client-role app`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := opts.outputFormat()
			if err != nil {
				return err
			}
			url, err := opts.resolvedDatabaseURL()
			if err != nil {
				return err
			}
			st, err := opts.openState(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			where := store.Redact(url)
			if err := st.Migrate(cmd.Context()); err != nil {
				if tooNew := (*domain.SchemaTooNewError)(nil); errors.As(err, &tooNew) {
					return fmt.Errorf("refusing to migrate %s: its schema is at version %d, newer than this build of Berth knows (%d), and this build's migrations are not the newer one's: run berth migrate of a build that knows schema version %d",
						where, tooNew.Versions.Database, tooNew.Versions.Known, tooNew.Versions.Database)
				}
				return fmt.Errorf("migrate the database: %w", err)
			}
			if cmd.Flags().Changed("client-role") {
				if err := grantClientRole(cmd.Context(), st, clientRole); err != nil {
					return err
				}
			}
			if format != outputTable {
				out := map[string]string{"database": where, "schema": "up to date"}
				if clientRole != "" {
					out["client_role"] = clientRole
				}
				return writeData(cmd.OutOrStdout(), format, out)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "schema of %s is up to date\n", where)
			if err == nil && clientRole != "" {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "role %s has a client's rights\n", clientRole)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&clientRole, "client-role", "", "an existing PostgreSQL role to give exactly a client's rights (run again after each upgrade)")
	return cmd
}
