// Package pgtest gives tests a fresh PostgreSQL database of their own on a real server.
//
// The server is BERTH_TEST_DATABASE_URL when set (make test sets it); otherwise the project's
// throwaway local cluster (scripts/pg-local.sh) is started. Each call creates a new database
// and returns its URL and a function that drops it.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/berth-dev/berth/internal/testkit"
)

var (
	serverOnce sync.Once
	serverURL  string
	serverErr  error
)

// ServerURL returns the URL of the test server's maintenance database.
func ServerURL() (string, error) {
	serverOnce.Do(func() {
		if url := os.Getenv("BERTH_TEST_DATABASE_URL"); url != "" {
			serverURL = url
			return
		}
		root, err := testkit.FindModuleRoot()
		if err != nil {
			serverErr = fmt.Errorf("no BERTH_TEST_DATABASE_URL, and no scripts/pg-local.sh to start a server: %w", err)
			return
		}
		out, err := exec.Command(filepath.Join(root, "scripts", "pg-local.sh"), "start").Output()
		if err != nil {
			serverErr = fmt.Errorf("start the local test PostgreSQL (scripts/pg-local.sh start): %w", err)
			return
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		serverURL = lines[len(lines)-1]
	})
	return serverURL, serverErr
}

// CreateDatabase creates an empty database and returns its URL and a function dropping it.
func CreateDatabase(ctx context.Context) (string, func(), error) {
	base, err := ServerURL()
	if err != nil {
		return "", nil, err
	}
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, fmt.Errorf("connect to the test server: %w", err)
	}
	defer conn.Close(ctx)
	var suffix [6]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return "", nil, err
	}
	name := "berth_test_" + hex.EncodeToString(suffix[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create test database: %w", err)
	}
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		return "", nil, err
	}
	url := replaceDatabase(base, cfg.Database, name)
	drop := func() {
		c, err := pgx.Connect(context.Background(), base)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	return url, drop, nil
}

// New creates a database for t and drops it when t ends.
func New(t testing.TB) string {
	t.Helper()
	url, drop, err := CreateDatabase(context.Background())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(drop)
	return url
}

func replaceDatabase(url, from, to string) string {
	if i := strings.Index(url, "/"+from+"?"); i >= 0 {
		return url[:i] + "/" + to + url[i+len(from)+1:]
	}
	if strings.HasSuffix(url, "/"+from) {
		return strings.TrimSuffix(url, from) + to
	}
	if strings.Contains(url, "://") {
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		return url + sep + "dbname=" + to
	}
	return url + " dbname=" + to
}
