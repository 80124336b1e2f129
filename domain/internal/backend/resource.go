package backend

import (
	"encoding/json"
	"fmt"
	"maps"

	"github.com/berth-dev/berth/domain"
)

// CheckMessages explains each check constraint of the schema as a field error: those both
// stores' schemas have, and a store's own in extra.
func CheckMessages(extra map[string]domain.FieldError) map[string]domain.FieldError {
	messages := map[string]domain.FieldError{
		"resources_name_check":          {Field: "name", Msg: "must not be blank"},
		"resources_args_check":          {Field: "args", Msg: "must be a JSON object"},
		"resources_labels_check":        {Field: "labels", Msg: "must be a JSON object of string values"},
		"slot_reservations_slots_check": {Field: "slots", Msg: "must be at least 1"},
		"resources_deleting_final":      {Field: "status", Msg: "stays deleting once a delete was requested, until the agent has deprovisioned the resource and removed the row; create the resource again afterwards"},
	}
	for name, fe := range extra {
		messages[name] = fe
	}
	return messages
}

// EncodeLabels is the stored JSON of labels ({} for none).
func EncodeLabels(labels map[string]string) (string, error) {
	if len(labels) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(labels)
	if err != nil {
		return "", &domain.FieldError{Field: "labels", Msg: "cannot be stored as JSON: " + err.Error()}
	}
	return string(b), nil
}

// DecodeLabels fills r.Labels from the stored JSON of its labels column (an empty map for
// none, as an empty args column reads). The schema keeps the column an object of string
// values; should it hold anything else, the column is recorded in r.Unreadable, as an
// unreadable args column is, and r.Labels is nil.
func DecodeLabels(r *domain.Resource, raw []byte) {
	r.Labels = nil
	if raw == nil {
		return
	}
	var labels map[string]string
	if err := json.Unmarshal(raw, &labels); err != nil {
		reason := "it is not a JSON object of string values"
		if len(raw) == 0 {
			reason = "it is empty"
		}
		r.Unreadable = append(r.Unreadable, domain.UnreadableColumn{Column: "labels", Reason: reason})
		return
	}
	if labels == nil {
		labels = map[string]string{}
	}
	r.Labels = labels
}

// conflictError is an error wrapping domain.ErrConflict whose message is its own.
type conflictError struct{ msg string }

func (e *conflictError) Error() string { return e.msg }
func (e *conflictError) Unwrap() error { return domain.ErrConflict }

// HibernateWhileDeleting is SetHibernate's error for a resource being deleted.
func HibernateWhileDeleting(id string) error {
	return &conflictError{fmt.Sprintf("resource %s is being deleted: it cannot be hibernated or woken", id)}
}

// LabelsWhileDeleting is SetLabels' error for a resource being deleted.
func LabelsWhileDeleting(id string) error {
	return &conflictError{fmt.Sprintf("resource %s is being deleted: its labels cannot change", id)}
}

// LabelChange decides ChangeLabels' change of cur's labels: whether writing it changes them
// (false: cur is already as asked), or why it is refused (a key to remove that cur lacks,
// too many labels, a resource being deleted).
func LabelChange(cur domain.Resource, set map[string]string, remove []string) (bool, error) {
	merged, err := domain.MergeLabels(cur.Labels, set, remove)
	switch {
	case err != nil:
		return false, err
	case maps.Equal(merged, cur.Labels):
		return false, nil
	case cur.Status == domain.StatusDeleting:
		return false, LabelsWhileDeleting(cur.ID)
	}
	return true, nil
}
