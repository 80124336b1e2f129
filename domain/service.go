package domain

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/juju/clock"
)

// MaxNameLength and MaxOwnerLength bound a resource's name and owner, in characters.
const (
	MaxNameLength  = 128
	MaxOwnerLength = 128
)

// Service is the client-facing way to change resources: it validates what a client asks for
// (naming the field and the fix) before a ResourceStore sees it, so the CLI and any other
// client share one set of rules. The store's own errors (which say which resource and wrap
// ErrNotFound, ErrAlreadyExists, ErrStale) are returned as they are.
type Service struct {
	store ResourceStore
	types TypeCatalog
}

// TypeCatalog is what the Service needs to know of resource types: which the agent serves,
// and each one's args. The environs declare their types; the agent's registry of environs
// offers them as an environ.Catalog, which is one.
type TypeCatalog interface {
	// TypeNames lists the served types, in the order help lists them.
	TypeNames() []ResourceType
	// ValidateArgs checks args against the schema of type t, a served type, returning a
	// *FieldError naming the field ("args.slots") and the fix.
	ValidateArgs(t ResourceType, args map[string]any) error
}

// NewService returns a Service storing resources in store, of the types types serves.
func NewService(store ResourceStore, types TypeCatalog) *Service {
	return &Service{store: store, types: types}
}

// Create validates r and inserts it as a pending resource. The name and owner are trimmed of
// surrounding spaces; nil args become empty args.
func (s *Service) Create(ctx context.Context, r NewResource) (Resource, error) {
	if err := s.checkType(r.Type); err != nil {
		return Resource{}, err
	}
	r.Name = strings.TrimSpace(r.Name)
	if r.Name == "" {
		return Resource{}, &FieldError{"name", "is required: give the resource a name, e.g. \"analytics\""}
	}
	if err := checkText("name", r.Name, MaxNameLength); err != nil {
		return Resource{}, err
	}
	r.Owner = strings.TrimSpace(r.Owner)
	if err := checkText("owner", r.Owner, MaxOwnerLength); err != nil {
		return Resource{}, err
	}
	r.Provisioner = strings.TrimSpace(r.Provisioner)
	if err := checkText("provisioner", r.Provisioner, MaxNameLength); err != nil {
		return Resource{}, err
	}
	if r.Args == nil {
		r.Args = map[string]any{}
	}
	if err := s.types.ValidateArgs(r.Type, r.Args); err != nil {
		return Resource{}, err
	}
	if err := ValidateLabels(r.Labels); err != nil {
		return Resource{}, err
	}
	return s.store.CreateResource(ctx, r)
}

// Get returns the resource with id, or an error wrapping ErrNotFound.
func (s *Service) Get(ctx context.Context, id string) (Resource, error) {
	id, err := checkID(id)
	if err != nil {
		return Resource{}, err
	}
	return s.store.GetResource(ctx, id)
}

// List returns the resources matching f, oldest first.
func (s *Service) List(ctx context.Context, f ListFilter) ([]Resource, error) {
	if f.Type != "" {
		if err := s.checkType(f.Type); err != nil {
			return nil, err
		}
	}
	if f.Status != "" && !f.Status.Valid() {
		return nil, &FieldError{"status", fmt.Sprintf("%q is not a status: use one of %s", f.Status, StatusNames())}
	}
	if f.Limit < 0 {
		return nil, &FieldError{"limit", fmt.Sprintf("must not be negative, got %d", f.Limit)}
	}
	return s.store.ListResources(ctx, f)
}

// UpdateArgs merges set into the resource's args, removes the keys in unset, validates the
// result against the resource's type and stores it (the generation moves on only when the
// args actually change). Unsetting a key the args do not have is an error, since it is
// usually a misspelling.
func (s *Service) UpdateArgs(ctx context.Context, id string, set map[string]any, unset []string) (Resource, error) {
	current, err := s.Get(ctx, id)
	if err != nil {
		return Resource{}, err
	}
	if current.ArgsUnreadable() {
		return Resource{}, &FieldError{"args", fmt.Sprintf("cannot be merged into: %s; give every arg again with --replace, or delete the resource", current.UnreadableReason())}
	}
	merged := maps.Clone(current.Args)
	if merged == nil {
		merged = map[string]any{}
	}
	for _, key := range unset {
		if _, both := set[key]; both {
			return Resource{}, &FieldError{"unset", fmt.Sprintf("%q is both set and unset: give it once", key)}
		}
		if _, ok := merged[key]; !ok {
			return Resource{}, &FieldError{"unset", fmt.Sprintf("the resource has no arg %q (its args: %s)", key, keyList(current.Args))}
		}
		delete(merged, key)
	}
	maps.Copy(merged, set)
	if err := s.validateArgs(current.Type, merged); err != nil {
		return Resource{}, err
	}
	return s.store.UpdateResourceArgs(ctx, current.ID, merged)
}

// ReplaceArgs replaces the resource's args with args, validated against the resource's
// type: the way to fix args a client wrote that Berth cannot read, or to drop every arg not
// given.
func (s *Service) ReplaceArgs(ctx context.Context, id string, args map[string]any) (Resource, error) {
	current, err := s.Get(ctx, id)
	if err != nil {
		return Resource{}, err
	}
	if args == nil {
		args = map[string]any{}
	}
	if err := s.validateArgs(current.Type, args); err != nil {
		return Resource{}, err
	}
	return s.store.UpdateResourceArgs(ctx, current.ID, args)
}

// Delete asks the agent to deprovision the resource and then remove it (idempotent).
func (s *Service) Delete(ctx context.Context, id string) (Resource, error) {
	id, err := checkID(id)
	if err != nil {
		return Resource{}, err
	}
	return s.store.RequestDelete(ctx, id)
}

// Pause stops the agent from reconciling, repairing or health-checking the resource until
// Resume; changes made meanwhile are applied then.
func (s *Service) Pause(ctx context.Context, id string) (Resource, error) {
	id, err := checkID(id)
	if err != nil {
		return Resource{}, err
	}
	return s.store.SetPaused(ctx, id, true)
}

// Resume undoes Pause.
func (s *Service) Resume(ctx context.Context, id string) (Resource, error) {
	id, err := checkID(id)
	if err != nil {
		return Resource{}, err
	}
	return s.store.SetPaused(ctx, id, false)
}

// Hibernate asks for the resource to be stopped with its data kept (see StatusHibernated).
func (s *Service) Hibernate(ctx context.Context, id string) (Resource, error) {
	id, err := checkID(id)
	if err != nil {
		return Resource{}, err
	}
	return s.store.SetHibernate(ctx, id, true)
}

// Wake asks for a hibernated (or hibernating) resource to run again.
func (s *Service) Wake(ctx context.Context, id string) (Resource, error) {
	id, err := checkID(id)
	if err != nil {
		return Resource{}, err
	}
	return s.store.SetHibernate(ctx, id, false)
}

// Retry clears the resource's backoff or permanent failure so that it is reconciled at once.
func (s *Service) Retry(ctx context.Context, id string) (Resource, error) {
	id, err := checkID(id)
	if err != nil {
		return Resource{}, err
	}
	return s.store.RequestRetry(ctx, id)
}

// Label sets the labels in set and removes those in remove, in one write of the store's
// (ChangeLabels): two label commands run at once both land. Removing a label the resource
// does not have is an error, since it is usually a misspelling.
func (s *Service) Label(ctx context.Context, id string, set map[string]string, remove []string) (Resource, error) {
	id, err := checkID(id)
	if err != nil {
		return Resource{}, err
	}
	if err := CheckLabelChange(set, remove); err != nil {
		return Resource{}, err
	}
	return s.store.ChangeLabels(ctx, id, set, remove)
}

// Wait reads the resource until until says it is done or fails, or ctx ends. until sees
// every read, including a failed one (ErrNotFound once the row is gone), so callers decide
// what "done" means. It returns the last resource read; when ctx ends the error wraps
// ctx.Err().
//
// The resource is read at once, then whenever the feed records an event or change of it (see
// FollowFeed: a wake-up of its listeners starts the read, so Wait returns as soon as the
// resource gets where until wants it), and every interval on clk regardless, which is also
// how often until can notice a deadline of its own. A store that keeps no feed is read every
// interval.
func (s *Service) Wait(ctx context.Context, clk clock.Clock, id string, until func(Resource, error) (done bool, err error), every time.Duration) (Resource, error) {
	if every <= 0 {
		return Resource{}, fmt.Errorf("wait for resource %s: poll interval must be positive, got %v", id, every)
	}
	id, err := checkID(id)
	if err != nil {
		return Resource{}, err
	}
	var last Resource
	check := func() (bool, error) {
		r, getErr := s.store.GetResource(ctx, id)
		if getErr == nil {
			last = r
		}
		return until(r, getErr)
	}
	feed, ok := s.store.(Feed)
	if !ok {
		return last, s.poll(ctx, clk, id, check, every)
	}
	// Taken before the first read, so that every change after that read is in the feed.
	from, err := LatestFeedPosition(ctx, feed)
	if err != nil {
		return Resource{}, fmt.Errorf("wait for resource %s: %w", id, err)
	}
	if done, err := check(); err != nil || done {
		return last, err
	}
	err = FollowFeed(ctx, feed, clk, from, every, func(ids []string, recheck bool) (bool, error) {
		if !recheck && !slices.ContainsFunc(ids, func(other string) bool { return strings.EqualFold(other, id) }) {
			return false, nil
		}
		return check()
	})
	if err != nil && ctx.Err() != nil {
		return last, fmt.Errorf("wait for resource %s: %w", id, ctx.Err())
	}
	return last, err
}

// poll calls check every interval on clk until it says done or fails, or ctx ends.
func (s *Service) poll(ctx context.Context, clk clock.Clock, id string, check func() (bool, error), every time.Duration) error {
	for {
		done, err := check()
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for resource %s: %w", id, ctx.Err())
		case <-clk.After(every):
		}
	}
}

func checkID(id string) (string, error) {
	id = strings.TrimSpace(id)
	if id == "" {
		return "", &FieldError{"id", "is required: give the resource's id (see the id column of the resource list)"}
	}
	return id, nil
}

// checkText refuses text longer than max characters or holding control characters (which
// would garble table output and logs).
func checkText(field, s string, max int) error {
	if !utf8.ValidString(s) {
		return &FieldError{field, "must be valid UTF-8 text"}
	}
	if n := utf8.RuneCountInString(s); n > max {
		return &FieldError{field, fmt.Sprintf("is %d characters long: use at most %d", n, max)}
	}
	if i := strings.IndexFunc(s, unicode.IsControl); i >= 0 {
		c, _ := utf8.DecodeRuneInString(s[i:])
		return &FieldError{field, fmt.Sprintf("contains the control character %q: use printable characters only", c)}
	}
	return nil
}

// checkType refuses a type no environ of the agent serves, naming those that are served.
func (s *Service) checkType(t ResourceType) error {
	served := s.types.TypeNames()
	if slices.Contains(served, t) {
		return nil
	}
	names := make([]string, len(served))
	for i, n := range served {
		names[i] = string(n)
	}
	return &FieldError{"type", fmt.Sprintf("%q is not a resource type: use one of %s", t, strings.Join(names, ", "))}
}

// validateArgs checks the args of an existing resource, whose type a client may have written
// without the Service (plain SQL): a type no environ serves is refused as Create refuses it.
func (s *Service) validateArgs(t ResourceType, args map[string]any) error {
	if err := s.checkType(t); err != nil {
		return err
	}
	return s.types.ValidateArgs(t, args)
}

// StatusNames lists every status for messages: "pending, provisioning, ...".
func StatusNames() string {
	names := make([]string, len(Statuses))
	for i, s := range Statuses {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

func keyList(m map[string]any) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}
