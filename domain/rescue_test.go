package domain_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain"
)

func TestForgetMessageNamesWhoWhyAndTheKeysOnly(t *testing.T) {
	r := domain.Resource{Provisioner: "gone", Status: domain.StatusDeleting, Reason: domain.ReasonDeleteRequested, Generation: 2, ObservedGeneration: 1,
		State: map[string]any{"volume": "v-9", "container": "c-1"}, Config: map[string]any{"password": "s3cret"}}
	got := domain.ForgetMessage(r, domain.Forgetting{By: "alice", Reason: "retired"}, "berth")
	want := `forgotten without deprovisioning by alice (database role berth): "retired"; it was deleting (reason DeleteRequested) at generation 2, observed 1; ` +
		`provisioner "gone" may have left behind what it made for it (state keys: container, volume; config keys: password)`
	if got != want {
		t.Errorf("ForgetMessage =\n%s\nwant\n%s", got, want)
	}
	bare := domain.ForgetMessage(domain.Resource{Status: domain.StatusPending}, domain.Forgetting{}, "")
	if !strings.HasPrefix(bare, "forgotten without deprovisioning; it was pending") || !strings.Contains(bare, "the default provisioner") ||
		!strings.Contains(bare, "state keys: none; config keys: none") {
		t.Errorf("ForgetMessage of a bare resource = %q", bare)
	}
}

func TestServiceChecksForgetAndSetProvisionerInput(t *testing.T) {
	ctx := context.Background()
	store := newMemStore()
	svc := domain.NewService(store, testTypes)
	var fe *domain.FieldError
	if _, err := svc.Forget(ctx, " ", domain.Forgetting{}); !errors.As(err, &fe) || fe.Field != "id" {
		t.Errorf("Forget without an id: %v, want a FieldError on id", err)
	}
	if _, err := svc.Forget(ctx, "r1", domain.Forgetting{Reason: strings.Repeat("x", domain.MaxReasonLength+1)}); !errors.As(err, &fe) || fe.Field != "reason" {
		t.Errorf("Forget with a long reason: %v, want a FieldError on reason", err)
	}
	if _, err := svc.SetProvisioner(ctx, "r1", "  "); !errors.As(err, &fe) || fe.Field != "provisioner" || !strings.Contains(fe.Msg, "berth agents") {
		t.Errorf("SetProvisioner to an empty name: %v, want a FieldError on provisioner naming berth agents", err)
	}
}
