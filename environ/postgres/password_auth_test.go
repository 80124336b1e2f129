package postgres

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// passwordAddr is the loopback address the test server asks a password of: a client whose
// connection comes from it (it binds its socket there; pg_hba.conf matches the client's
// address, not the one it connected to) must authenticate with scram-sha-256. The rest of
// the loopback is trusted, so a login from anywhere else proves nothing of a password.
const passwordAddr = "127.0.0.2"

// passwordRuleHowTo says how to give a server the rule the tests need.
const passwordRuleHowTo = "put the line `host all all " + passwordAddr + "/32 scram-sha-256` in its pg_hba.conf, before the trust lines, and reload it " +
	"(scripts/pg-local.sh start does both for its cluster, also one made before)"

// passwordRule is what checkPasswordRule found, once per test binary.
var passwordRule struct {
	once sync.Once
	err  error
}

// checkPasswordRule fails unless the server behind admin asks a password of connections
// from passwordAddr: the first rule of its pg_hba.conf that matches them says
// scram-sha-256, and a login from there with a wrong password is refused.
func checkPasswordRule(ctx context.Context, admin *pgx.Conn, server *pgx.ConnConfig) error {
	passwordRule.once.Do(func() { passwordRule.err = findPasswordRule(ctx, admin, server) })
	return passwordRule.err
}

func findPasswordRule(ctx context.Context, admin *pgx.Conn, server *pgx.ConnConfig) error {
	rows, err := admin.Query(ctx, `SELECT line_number, type, database, user_name, COALESCE(address, ''), COALESCE(netmask, ''), COALESCE(auth_method, '')
FROM pg_hba_file_rules WHERE error IS NULL ORDER BY line_number`)
	if err != nil {
		return fmt.Errorf("read the test server's pg_hba_file_rules: %w", err)
	}
	defer rows.Close()
	type rule struct {
		line                     int
		kind                     string
		databases, users         []string
		address, netmask, method string
	}
	var first *rule
	var all []rule
	for rows.Next() {
		var r rule
		if err := rows.Scan(&r.line, &r.kind, &r.databases, &r.users, &r.address, &r.netmask, &r.method); err != nil {
			return fmt.Errorf("read the test server's pg_hba_file_rules: %w", err)
		}
		all = append(all, r)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the test server's pg_hba_file_rules: %w", err)
	}
	for i, r := range all {
		if (r.kind == "host" || r.kind == "hostnossl") && coversPasswordAddr(r.address, r.netmask) {
			first = &all[i]
			break
		}
	}
	switch {
	case first == nil:
		return fmt.Errorf("the test server (BERTH_TEST_DATABASE_URL) has no pg_hba.conf rule for connections from %s, so the roles' passwords cannot be proven by its own authentication: %s", passwordAddr, passwordRuleHowTo)
	case first.method != "scram-sha-256" || !slices.Equal(first.databases, []string{"all"}) || !slices.Equal(first.users, []string{"all"}):
		return fmt.Errorf("the first pg_hba.conf rule of the test server (BERTH_TEST_DATABASE_URL) for connections from %s is line %d (%s %v %v %s), not scram-sha-256 for all databases and users, so a login proves nothing of a password: %s",
			passwordAddr, first.line, first.kind, first.databases, first.users, first.method, passwordRuleHowTo)
	}
	// The file may not be what the server loaded: a wrong password must be refused.
	cfg := fromPasswordAddr(server)
	cfg.Password = "not-the-password"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		conn.Close(ctx)
		return fmt.Errorf("the test server let %s in from %s with a wrong password: its pg_hba.conf has the rule (line %d) but it was not reloaded; %s", cfg.User, passwordAddr, first.line, passwordRuleHowTo)
	}
	if !isCode(err, "28P01") {
		return fmt.Errorf("a login from %s with a wrong password was not refused for its password (SQLSTATE 28P01) but with: %v; the server may not have loaded the rule of line %d (reload it) or not be on this machine's loopback; %s",
			passwordAddr, err, first.line, passwordRuleHowTo)
	}
	return nil
}

// coversPasswordAddr reports whether a rule's address and netmask (as pg_hba_file_rules
// shows them) match a client at passwordAddr.
func coversPasswordAddr(address, netmask string) bool {
	switch address {
	case "all", "samehost", "samenet":
		return true
	}
	ip, mask := net.ParseIP(address), net.ParseIP(netmask)
	if ip == nil || mask == nil {
		return false
	}
	if v4 := mask.To4(); v4 != nil {
		mask = v4
	}
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	n := &net.IPNet{IP: ip.Mask(net.IPMask(mask)), Mask: net.IPMask(mask)}
	return n.Contains(net.ParseIP(passwordAddr))
}

// fromPasswordAddr is a copy of server's config whose connections come from passwordAddr.
func fromPasswordAddr(server *pgx.ConnConfig) *pgx.ConnConfig {
	cfg := server.Copy()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(passwordAddr)}, Timeout: 10 * time.Second, KeepAlive: 5 * time.Minute}
	cfg.DialFunc = dialer.DialContext
	return cfg
}

// TestAPasswordChangedOutOfBandIsReset: with the broker's own logins made where the server
// asks for the password, a role's password changed out of band is found by CheckResource
// (the role's login with its file's password is refused), reported and set back from the
// file, after which the file's password logs in again; AwaitReady's login proves the
// password the same way.
func TestAPasswordChangedOutOfBandIsReset(t *testing.T) {
	f := newFixture(t, nil)
	if err := checkPasswordRule(t.Context(), f.admin, f.server); err != nil {
		t.Fatal(err)
	}
	f.env.login = fromPasswordAddr(f.env.login)
	r := f.reconcile(newResource(), nil)
	if err := f.env.AwaitReady(t.Context(), r); err != nil {
		t.Fatalf("AwaitReady, logging in with the file's password: %v", err)
	}
	name := r.Config["user"].(string)
	if _, err := f.admin.Exec(t.Context(), "ALTER ROLE "+ident(name)+" PASSWORD "+literal("Changed-Out-Of-Band")); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "login with the file's password once it was changed out of band", f.login(r, ""), "28P01")
	checked, err := f.env.CheckResource(t.Context(), r, withArgs(nil))
	if err != nil {
		t.Fatalf("CheckResource: %v", err)
	}
	if len(checked.Repairs) != 1 || !strings.Contains(checked.Repairs[0], "password reset from its file") {
		t.Fatalf("repairs %q, want the password reset from its file", checked.Repairs)
	}
	if err := f.login(r, ""); err != nil {
		t.Fatalf("login with the file's password once the check reset it: %v", err)
	}
	f.checkPassword(r)
	if again, err := f.env.CheckResource(t.Context(), checked, withArgs(nil)); err != nil || len(again.Repairs) > 0 {
		t.Fatalf("CheckResource with nothing drifted = %v, %v; want healthy, no repairs", again.Repairs, err)
	}
}
