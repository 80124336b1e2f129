package external

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// openAPIPath is the protocol's OpenAPI document, from this package's directory.
const openAPIPath = "../../docs/brokers/external.openapi.yaml"

func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(openAPIPath)
	if err != nil {
		t.Fatalf("load %s: %v", openAPIPath, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("%s is not a valid OpenAPI 3 document: %v", openAPIPath, err)
	}
	return doc
}

func TestOpenAPIDocumentIsValidAndCoversEveryCall(t *testing.T) {
	doc := loadOpenAPI(t)
	for _, path := range []string{PathInfo, PathReconcile, PathAwaitReady, PathDeprovision, PathCheck, PathCheckResource, PathHibernate, PathCapacity} {
		if doc.Paths.Find(path) == nil {
			t.Errorf("the OpenAPI document has no path %s", path)
		}
	}
	classes := doc.Components.Schemas["ErrorBody"].Value.Properties["error"].Value.Properties["class"].Value.Enum
	if len(classes) != len(knownClasses) {
		t.Errorf("the document lists error classes %v; the agent knows %d", classes, len(knownClasses))
	}
	for _, c := range classes {
		if !knownClasses[ErrorClass(c.(string))] {
			t.Errorf("the document's error class %q is unknown to the agent", c)
		}
	}
}

// validating wraps a broker's handler: every request the agent sends, and every answer
// the broker gives, is checked against the OpenAPI document; what does not match is
// recorded.
type validating struct {
	t      *testing.T
	router routers.Router
	next   http.Handler

	mu       sync.Mutex
	problems []string
	calls    int
}

func newValidating(t *testing.T, next http.Handler) *validating {
	router, err := legacy.NewRouter(loadOpenAPI(t))
	if err != nil {
		t.Fatal(err)
	}
	return &validating{t: t, router: router, next: next}
}

func (v *validating) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	// The document's server is http://broker: route a copy of the request as if sent there.
	routed := r.Clone(r.Context())
	routed.URL = &url.URL{Scheme: "http", Host: "broker", Path: r.URL.Path}
	routed.Host = "broker"
	routed.Body = io.NopCloser(bytes.NewReader(body))
	route, params, err := v.router.FindRoute(routed)
	if err != nil {
		v.problem(r.Method + " " + r.URL.Path + ": no such call in the document: " + err.Error())
		r.Body = io.NopCloser(bytes.NewReader(body))
		v.next.ServeHTTP(w, r)
		return
	}
	input := &openapi3filter.RequestValidationInput{Request: routed, PathParams: params, Route: route}
	if err := openapi3filter.ValidateRequest(r.Context(), input); err != nil {
		v.problem("request " + r.URL.Path + ": " + err.Error())
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	v.next.ServeHTTP(rec, r)
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: input, Status: rec.Code, Header: rec.Header()}
	out.SetBodyBytes(rec.Body.Bytes())
	if err := openapi3filter.ValidateResponse(r.Context(), out); err != nil {
		v.problem("answer to " + r.URL.Path + ": " + err.Error())
	}
	v.mu.Lock()
	v.calls++
	v.mu.Unlock()
	for k, vals := range rec.Header() {
		w.Header()[k] = vals
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func (v *validating) problem(p string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.problems = append(v.problems, p)
}

func (v *validating) check() {
	v.t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.calls == 0 {
		v.t.Error("no call went through the validator")
	}
	for _, p := range v.problems {
		v.t.Errorf("does not match the OpenAPI document: %s", p)
	}
}

func jsonRaw(t *testing.T, v any) json.RawMessage {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestTheValidatorCatchesWhatTheDocumentForbids: the proof that the validator checks
// something.
func TestTheValidatorCatchesWhatTheDocumentForbids(t *testing.T) {
	v := newValidating(t, answer(http.StatusOK, `{"resource": {"id": "r1"}}`)) // no lease, resource without type
	srv := httptest.NewServer(v)
	defer srv.Close()
	resp, err := http.Post(srv.URL+PathReconcile, "application/json", bytes.NewReader([]byte(`{"resource": {"id": "r1", "type": "Bad Type", "state": {}, "config": {}}, "lease": null}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	v.mu.Lock()
	defer v.mu.Unlock()
	var request, answer bool
	for _, p := range v.problems {
		request = request || strings.HasPrefix(p, "request ")
		answer = answer || strings.HasPrefix(p, "answer ")
	}
	if !request || !answer {
		t.Errorf("problems found: %q; want the request (no options, a bad type) and the answer (no lease) refused", v.problems)
	}
}
