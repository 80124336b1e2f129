package external

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/domain/sqlite"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/static"
)

// TestTheStaticBrokerPassesVerifyThroughTheAdapter holds the built-in static broker, on a
// real (SQLite) slot store, to the protocol's contract: served through the Adapter, it
// passes the conformance suite, and every call and answer matches the OpenAPI document.
func TestTheStaticBrokerPassesVerifyThroughTheAdapter(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "berth.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	spec := jsonRaw(t, map[string]any{"health_path": "", "runtimes": []map[string]any{
		{"host": "http://host-a:9091", "slots": 8, "data_dir": "/data"},
		{"host": "http://host-b:9091", "slots": 8, "data_dir": "/data"},
	}})
	pool, err := static.New("pool", spec, environ.Deps{Slots: st, Resources: st})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	v := newValidating(t, &Adapter{Env: pool, Types: []domain.ResourceType{"runtime"}})
	srv := httptest.NewServer(v)
	defer srv.Close()
	results, err := Verify(ctx, jsonRaw(t, map[string]any{"types": []string{"runtime"}, "url": srv.URL}),
		VerifyConfig{Type: "runtime", Args: map[string]any{"slots": 2}}, environ.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	expectAllPass(t, results, "hibernate-and-wake")
	v.check()
}
