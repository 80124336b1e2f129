package postgres

import (
	"slices"
	"strings"
	"testing"
)

// The ClickHouse statements of every step, as they are sent; no ClickHouse server is at
// hand, so the text is what is proven.
func TestClickHouseStatements(t *testing.T) {
	hash := ClickHousePasswordHash("correct horse")
	if hash != "4104d36f8da2c254349f85836793ebe029e0c957063a34c91c2e9203187b5631" {
		t.Fatalf("ClickHousePasswordHash = %s", hash)
	}
	u := ClickHouseUser{Name: "berth_0b5c7a4e", PasswordSHA256: hash, MaxQueries: 8}
	onCluster := u
	onCluster.Cluster = "analytics"
	for _, tc := range []struct {
		user ClickHouseUser
		step ClickHouseStep
		want []string
	}{
		{u, ClickHouseProvision, []string{
			"CREATE USER IF NOT EXISTS `berth_0b5c7a4e` IDENTIFIED WITH sha256_hash BY '" + hash + "' HOST ANY DEFAULT DATABASE `berth_0b5c7a4e` SETTINGS max_concurrent_queries_for_user = 8 READONLY",
			"CREATE DATABASE IF NOT EXISTS `berth_0b5c7a4e`",
			"GRANT ALL ON `berth_0b5c7a4e`.* TO `berth_0b5c7a4e`",
			"ALTER USER `berth_0b5c7a4e` IDENTIFIED WITH sha256_hash BY '" + hash + "' HOST ANY SETTINGS max_concurrent_queries_for_user = 8 READONLY",
		}},
		{u, ClickHouseResize, []string{"ALTER USER `berth_0b5c7a4e` SETTINGS max_concurrent_queries_for_user = 8 READONLY"}},
		{u, ClickHouseHibernate, []string{
			"ALTER USER `berth_0b5c7a4e` HOST NONE",
			"KILL QUERY WHERE user = 'berth_0b5c7a4e' ASYNC",
		}},
		{u, ClickHouseWake, []string{"ALTER USER `berth_0b5c7a4e` HOST ANY"}},
		{u, ClickHouseDeprovision, []string{
			"ALTER USER IF EXISTS `berth_0b5c7a4e` HOST NONE",
			"KILL QUERY WHERE user = 'berth_0b5c7a4e' ASYNC",
			"DROP DATABASE IF EXISTS `berth_0b5c7a4e`",
			"DROP USER IF EXISTS `berth_0b5c7a4e`",
		}},
		{u, ClickHouseCheck, []string{
			"SELECT (SELECT count() FROM system.users WHERE name = 'berth_0b5c7a4e') AS user_exists, (SELECT count() FROM system.databases WHERE name = 'berth_0b5c7a4e') AS database_exists, (SELECT count() FROM system.grants WHERE user_name = 'berth_0b5c7a4e' AND (database IS NULL OR database != 'berth_0b5c7a4e')) AS grants_elsewhere",
		}},
		{onCluster, ClickHouseDeprovision, []string{
			"ALTER USER IF EXISTS `berth_0b5c7a4e` ON CLUSTER `analytics` HOST NONE",
			"KILL QUERY ON CLUSTER `analytics` WHERE user = 'berth_0b5c7a4e' ASYNC",
			"DROP DATABASE IF EXISTS `berth_0b5c7a4e` ON CLUSTER `analytics`",
			"DROP USER IF EXISTS `berth_0b5c7a4e` ON CLUSTER `analytics`",
		}},
		{onCluster, ClickHouseProvision, []string{
			"CREATE USER IF NOT EXISTS `berth_0b5c7a4e` ON CLUSTER `analytics` IDENTIFIED WITH sha256_hash BY '" + hash + "' HOST ANY DEFAULT DATABASE `berth_0b5c7a4e` SETTINGS max_concurrent_queries_for_user = 8 READONLY",
			"CREATE DATABASE IF NOT EXISTS `berth_0b5c7a4e` ON CLUSTER `analytics`",
			"GRANT ON CLUSTER `analytics` ALL ON `berth_0b5c7a4e`.* TO `berth_0b5c7a4e`",
			"ALTER USER `berth_0b5c7a4e` ON CLUSTER `analytics` IDENTIFIED WITH sha256_hash BY '" + hash + "' HOST ANY SETTINGS max_concurrent_queries_for_user = 8 READONLY",
		}},
	} {
		got, err := tc.user.Statements(tc.step)
		if err != nil {
			t.Fatalf("%s: %v", tc.step, err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s (cluster %q):\n got %q\nwant %q", tc.step, tc.user.Cluster, got, tc.want)
		}
	}
}

// What the templates cannot quote safely is refused before anything is rendered, and the
// quoting functions escape what they are given.
func TestClickHouseStatementsRefuseUnsafeInput(t *testing.T) {
	hash := ClickHousePasswordHash("x")
	for _, u := range []ClickHouseUser{
		{Name: "a`b", PasswordSHA256: hash, MaxQueries: 1},
		{Name: "ok", PasswordSHA256: hash, MaxQueries: 1, Cluster: "c'; DROP"},
		{Name: "ok", PasswordSHA256: "plain password", MaxQueries: 1},
		{Name: "ok", PasswordSHA256: hash, MaxQueries: 0},
	} {
		if got, err := u.Statements(ClickHouseProvision); err == nil {
			t.Errorf("Statements(%+v) = %q, want a refusal", u, got)
		}
	}
	if got := chIdent("a`b\\"); got != "`a\\`b\\\\`" {
		t.Errorf("chIdent = %s", got)
	}
	if got := chString(`it's \`); got != `'it\'s \\'` {
		t.Errorf("chString = %s", got)
	}
	if _, err := (ClickHouseUser{Name: "n"}).Statements("nosuchstep"); err == nil || !strings.Contains(err.Error(), "nosuchstep") {
		t.Errorf("an unknown step: %v", err)
	}
}
