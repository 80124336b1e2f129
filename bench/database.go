package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// serverURL is the maintenance-database URL of the server the bench runs on.
func serverURL() (string, error) {
	for _, name := range []string{"BERTH_BENCH_DATABASE_URL", "BERTH_TEST_DATABASE_URL"} {
		if v := os.Getenv(name); v != "" {
			return v, nil
		}
	}
	return "", errors.New("no database server: set BERTH_BENCH_DATABASE_URL (or BERTH_TEST_DATABASE_URL) to a maintenance-database URL of a PostgreSQL server the bench may create databases on")
}

// database is a fresh database on the bench server.
type database struct {
	name   string
	url    string
	server string
}

// createDatabase creates an empty database with a random name.
func createDatabase(ctx context.Context, server string) (*database, error) {
	var suffix [6]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return nil, err
	}
	name := "berth_bench_" + hex.EncodeToString(suffix[:])
	dbURL, err := withDatabase(server, name)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return nil, fmt.Errorf("connect to the bench server: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, fmt.Errorf("create database %s (the server's user needs CREATEDB): %w", name, err)
	}
	return &database{name: name, url: dbURL, server: server}, nil
}

// drop removes the database, disconnecting whoever is still connected. It runs on exit
// paths, so it does not use the (possibly cancelled) run context.
func (d *database) drop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, d.server)
	if err == nil {
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+d.name+" WITH (FORCE)")
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: could not drop database %s (drop it by hand): %v\n", d.name, err)
	}
}

// withDatabase returns the server URL pointed at database name. Both URL and keyword/value
// connection strings are accepted.
func withDatabase(server, name string) (string, error) {
	if !strings.Contains(server, "://") {
		return server + " dbname=" + name, nil
	}
	u, err := url.Parse(server)
	if err != nil {
		return "", errors.New("the database server URL does not parse; check BERTH_BENCH_DATABASE_URL")
	}
	u.Path = "/" + name
	q := u.Query()
	if q.Has("dbname") {
		q.Del("dbname")
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}
