package domain

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxLabels bounds how many labels a resource carries.
const MaxLabels = 64

// ValidateLabels checks labels as Kubernetes checks its own, less the key prefix: a key is a
// name (at most 63 characters, alphanumerics with '-', '_' or '.' inside), so that the
// Kubernetes environ can put each under Berth's own prefix; a value is at most 63 such
// characters or empty.
func ValidateLabels(l map[string]string) error {
	if len(l) > MaxLabels {
		return &FieldError{"labels", fmt.Sprintf("has %d labels: use at most %d", len(l), MaxLabels)}
	}
	for key, value := range l {
		if strings.Contains(key, "/") {
			return &FieldError{"labels", fmt.Sprintf("key %q has a prefix: label keys are plain names, e.g. \"team\" (Berth adds its own prefix where it labels objects)", key)}
		}
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return &FieldError{"labels", fmt.Sprintf("key %q is not a label key: %s", key, strings.Join(errs, "; "))}
		}
		if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
			return &FieldError{"labels", fmt.Sprintf("value %q of %q is not a label value: %s", value, key, strings.Join(errs, "; "))}
		}
	}
	return nil
}

// ParseSelector parses a label selector in Kubernetes' syntax ("team=data,tier!=dev",
// "env in (prod,staging)", "!legacy"); "" selects everything.
func ParseSelector(s string) (labels.Selector, error) {
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, &FieldError{"selector", fmt.Sprintf("%v: write it as key=value, key!=value, key in (a,b), key or !key, joined by commas", err)}
	}
	return sel, nil
}

// MatchesSelector reports whether r's labels match sel (nil matches everything).
func (r Resource) MatchesSelector(sel labels.Selector) bool {
	return sel == nil || sel.Empty() || sel.Matches(labels.Set(r.Labels))
}

// CheckLabelChange checks a change of labels before a store sees it: the labels set are
// valid ones and no key is both set and removed.
func CheckLabelChange(set map[string]string, remove []string) error {
	for _, key := range remove {
		if _, both := set[key]; both {
			return &FieldError{"labels", fmt.Sprintf("%q is both set and removed: give it once", key)}
		}
	}
	return ValidateLabels(set)
}

// MergeLabels returns current with the labels in set set and the keys in remove removed, as
// ChangeLabels writes them. Removing a key current does not have is an error, since it is
// usually a misspelling, and so is ending with more than MaxLabels.
func MergeLabels(current, set map[string]string, remove []string) (map[string]string, error) {
	merged := maps.Clone(current)
	if merged == nil {
		merged = map[string]string{}
	}
	for _, key := range remove {
		if _, ok := merged[key]; !ok {
			return nil, &FieldError{"labels", fmt.Sprintf("the resource has no label %q (its labels: %s)", key, labelKeyList(current))}
		}
		delete(merged, key)
	}
	maps.Copy(merged, set)
	if len(merged) > MaxLabels {
		return nil, &FieldError{"labels", fmt.Sprintf("would have %d labels: use at most %d", len(merged), MaxLabels)}
	}
	return merged, nil
}

func labelKeyList(m map[string]string) string {
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}
