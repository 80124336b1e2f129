package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/domain"
)

// The client contract of migration 0012: the role that owns Berth's tables is the agent's,
// a client role gets what GrantClientRole grants, and with owner isolation on a client role
// sees and writes only the rows of the owners granted to it.

// clientReadableTables are Berth's tables, every one of which a client role may read. A
// migration that adds a table adds it here (a test checks the list against the schema).
var clientReadableTables = []string{
	"agents", "berth_owner_grants", "broker_breakers", "broker_budgets", "capacity_samples", "capacity_warnings", "change_log",
	"leadership", "owner_policies", "owner_quotas", "provisioner_specs", "resource_events", "resources", "schema_migrations",
	"slot_host_usage", "slot_owner_usage", "slot_reservations",
}

// agentOnlyTables are Berth's tables no client role may read: the name of the channel new
// rows are announced on is a secret (migration 0029). GrantClientRole revokes every right on
// them.
var agentOnlyTables = []string{"announce_channel"}

// isolatedTables are the tables whose row security owner isolation turns on.
var isolatedTables = []string{"resources", "resource_events", "berth_owner_grants", "owner_quotas"}

// GrantClientRole gives the existing role role exactly the rights of a client: it may read
// Berth's tables and insert, update and delete resources (the triggers keep it to the client
// columns), and nothing else on Berth's tables. It is idempotent; run it again after each
// upgrade, so that new tables are readable. A role that acts as the agent (a superuser, or
// the tables' owner or a member of it) is refused: the contract cannot hold for it.
func (s *State) GrantClientRole(ctx context.Context, role string) error {
	if role == "" {
		return &domain.FieldError{Field: "client-role", Msg: "must not be empty: name the database role your clients connect as"}
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var exists, super, agent bool
		if err := tx.QueryRow(ctx, `
			SELECT count(*) = 1, coalesce(bool_or(r.rolsuper), false),
			       coalesce(bool_or(pg_has_role(r.oid, c.relowner, 'USAGE')), false)
			  FROM pg_roles r, pg_class c
			 WHERE r.rolname = $1 AND c.oid = 'resources'::regclass`, role).Scan(&exists, &super, &agent); err != nil {
			return err
		}
		switch {
		case !exists:
			return fmt.Errorf("role %q does not exist: create it first (CREATE ROLE %s LOGIN PASSWORD '...'), then run this again: %w",
				role, pgx.Identifier{role}.Sanitize(), domain.ErrNotFound)
		case super:
			return fmt.Errorf("role %q is a superuser, which no grant or trigger restricts: give clients a role of their own", role)
		case agent:
			return fmt.Errorf("role %q owns Berth's tables or is a member of their owner, so it acts as the agent: give clients a role of their own", role)
		}
		ident := pgx.Identifier{role}.Sanitize()
		tables, agentOnly := tableList(clientReadableTables), tableList(agentOnlyTables)
		for _, stmt := range []string{
			`REVOKE ALL ON ` + tables + `, ` + agentOnly + ` FROM ` + ident,
			`GRANT SELECT ON ` + tables + ` TO ` + ident,
			`GRANT INSERT, UPDATE, DELETE ON resources TO ` + ident,
		} {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		var schema string
		if err := tx.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `GRANT USAGE ON SCHEMA `+pgx.Identifier{schema}.Sanitize()+` TO `+ident)
		return err
	})
	if err != nil {
		return fmt.Errorf("grant client role %q: %w", role, err)
	}
	return nil
}

// tableList is names as a comma-separated list of quoted identifiers.
func tableList(names []string) string {
	list := ""
	for i, t := range names {
		if i > 0 {
			list += ", "
		}
		list += pgx.Identifier{t}.Sanitize()
	}
	return list
}

// checkAgentRole refuses a role that does not act as the agent on a database that has
// Berth's tables: migrating, and the agent's writes, need the role that owns them.
func (s *State) checkAgentRole(ctx context.Context) error {
	var role string
	var agent *bool
	err := s.pool.QueryRow(ctx, `
		SELECT current_user, (SELECT pg_has_role(current_user, c.relowner, 'USAGE')
		                        FROM pg_class c WHERE c.oid = to_regclass('resources'))`).Scan(&role, &agent)
	if err != nil {
		return fmt.Errorf("read the database role: %w", err)
	}
	if agent != nil && !*agent {
		return fmt.Errorf("role %q does not own Berth's tables, so it is a client: berth run and berth migrate need the agent's role (the tables' owner); see berth doctor: %w", role, domain.ErrForbidden)
	}
	return nil
}

// actsAsAgentSQL is true when the connection's role acts as the agent: it holds TRIGGER on
// resources with the grant option, the test the triggers make (migration 0026), which
// PostgreSQL answers for the tables' owner, its members and superusers from the catalog
// cache. Ownership itself (checkAgentRole) is what migrating needs.
const actsAsAgentSQL = `pg_catalog.has_table_privilege('resources'::regclass, 'TRIGGER WITH GRANT OPTION')`

// Access reports what the connection's role may do with Berth's tables.
func (s *State) Access(ctx context.Context) (domain.Access, error) {
	var a domain.Access
	err := s.pool.QueryRow(ctx, `
		SELECT current_user, pg_get_userbyid(c.relowner), `+actsAsAgentSQL+`, r.rolsuper,
		       has_table_privilege(c.oid, 'SELECT'), has_table_privilege(c.oid, 'INSERT'),
		       has_table_privilege(c.oid, 'UPDATE'), has_table_privilege(c.oid, 'DELETE'),
		       has_table_privilege('resource_events', 'SELECT'), c.relrowsecurity
		  FROM pg_class c, pg_roles r
		 WHERE c.oid = 'resources'::regclass AND r.rolname = current_user`).Scan(
		&a.Role, &a.TablesOwner, &a.Agent, &a.Superuser, &a.Read, &a.Create, &a.Update, &a.Delete, &a.ReadEvents, &a.OwnerIsolation)
	if err != nil {
		return a, fmt.Errorf("read the role's access: %w", err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&a.SchemaVersion); err != nil {
		return a, fmt.Errorf("read the schema version: %w", err)
	}
	if a.Agent || !a.Read {
		return a, nil
	}
	err = s.pool.QueryRow(ctx, `
		SELECT coalesce(array_agg(owner ORDER BY owner), '{}') FROM berth_owner_grants WHERE role_name = current_user`).Scan(&a.Owners)
	if err != nil {
		return a, fmt.Errorf("read the role's owners: %w", err)
	}
	return a, nil
}

// GrantOwners lets role act for owners when owner isolation is on. Owners already granted
// stay as they are.
func (s *State) GrantOwners(ctx context.Context, role string, owners []string) error {
	if err := checkOwnerGrant(role, owners); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `
		INSERT INTO berth_owner_grants (role_name, owner) SELECT $1, unnest($2::text[])
		ON CONFLICT DO NOTHING`, role, owners)
	if err != nil {
		return fmt.Errorf("grant owners to role %q: %w", role, describeDBError(err))
	}
	return nil
}

// RevokeOwners takes owners from role; owners it was not granted are ignored.
func (s *State) RevokeOwners(ctx context.Context, role string, owners []string) error {
	if err := checkOwnerGrant(role, owners); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `DELETE FROM berth_owner_grants WHERE role_name = $1 AND owner = ANY ($2::text[])`, role, owners)
	if err != nil {
		return fmt.Errorf("revoke owners from role %q: %w", role, describeDBError(err))
	}
	return nil
}

func checkOwnerGrant(role string, owners []string) error {
	if role == "" {
		return &domain.FieldError{Field: "role", Msg: "must not be empty: name the client's database role"}
	}
	if len(owners) == 0 {
		return &domain.FieldError{Field: "owner", Msg: "name at least one owner"}
	}
	if slices.Contains(owners, "") {
		return &domain.FieldError{Field: "owner", Msg: "must not be empty"}
	}
	return nil
}

// OwnerGrants lists every grant, by role and owner.
func (s *State) OwnerGrants(ctx context.Context) ([]domain.OwnerGrant, error) {
	rows, err := s.pool.Query(ctx, `SELECT role_name, owner, granted_at FROM berth_owner_grants ORDER BY role_name, owner`)
	if err != nil {
		return nil, fmt.Errorf("list owner grants: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.OwnerGrant, error) {
		var g domain.OwnerGrant
		err := row.Scan(&g.Role, &g.Owner, &g.GrantedAt)
		g.GrantedAt = g.GrantedAt.UTC()
		return g, err
	})
	if err != nil {
		return nil, fmt.Errorf("list owner grants: %w", err)
	}
	return out, nil
}

// SetOwnerIsolation turns row-level security on resources, their history and the grants on
// or off. The tables' owner (the agent) is not subject to it; only it may turn it.
func (s *State) SetOwnerIsolation(ctx context.Context, on bool) error {
	verb := "DISABLE"
	if on {
		verb = "ENABLE"
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, t := range isolatedTables {
			if _, err := tx.Exec(ctx, `ALTER TABLE `+t+` `+verb+` ROW LEVEL SECURITY`); err != nil {
				return err
			}
		}
		return nil
	})
	var pgErr interface{ SQLState() string }
	if errors.As(err, &pgErr) && pgErr.SQLState() == "42501" {
		return fmt.Errorf("turn owner isolation %s: only the owner of Berth's tables (the agent's role) may: use the agent's database URL: %w", onOff(on), domain.ErrForbidden)
	}
	if err != nil {
		return fmt.Errorf("turn owner isolation %s: %w", onOff(on), err)
	}
	return nil
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}
