package kubernetes_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ/kubernetes"
)

func TestClickhouseArgsTakeNoKeys(t *testing.T) {
	if _, err := kubernetes.DecodeClickhouseArgs(map[string]any{}); err != nil {
		t.Fatalf("empty args: %v", err)
	}
	_, err := kubernetes.DecodeClickhouseArgs(map[string]any{"slots": 1})
	expectFieldError(t, err, "args.slots", "it takes no keys")
}

func TestClickhouseConfig(t *testing.T) {
	stored := map[string]any{
		"dsn":                       "clickhouse://default@h:9000/default",
		"password_secret_namespace": "ns",
		"password_secret_name":      "ch-1-auth",
		"password_secret_key":       "password",
	}
	got, err := kubernetes.DecodeClickhouseConfig(stored)
	want := &kubernetes.ClickhouseConfig{DSN: "clickhouse://default@h:9000/default", PasswordSecretNamespace: "ns", PasswordSecretName: "ch-1-auth", PasswordSecretKey: "password"}
	if err != nil || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(got.AsMap(), stored) {
		t.Fatalf("config = %+v, %v", got, err)
	}
	_, err = kubernetes.DecodeClickhouseConfig(map[string]any{"dsn": nil, "user": "x"})
	expectFieldError(t, err, "config.user", "known keys: dsn, password_secret_namespace")
	_, err = kubernetes.DecodeClickhouseConfig(map[string]any{"dsn": 3.0})
	expectFieldError(t, err, "config.dsn", "must be a string")
	_, err = kubernetes.DecodeClickhouseConfig(map[string]any{"password_secret_name": true})
	expectFieldError(t, err, "config.password_secret_name", "must be a string")
}

// expectFieldError checks err is a *domain.FieldError on field whose message mentions hint.
func expectFieldError(t *testing.T, err error, field, hint string) {
	t.Helper()
	var fe *domain.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v, want a field error on %s", err, field)
	}
	if fe.Field != field || !strings.Contains(fe.Msg, hint) {
		t.Fatalf("err = %q, want field %s and a message mentioning %q", err, field, hint)
	}
	if !strings.HasPrefix(err.Error(), field+": ") {
		t.Fatalf("err = %q does not start with the field name", err)
	}
}
