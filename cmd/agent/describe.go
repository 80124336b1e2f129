package main

import (
	"time"

	"github.com/berth-dev/berth/domain"
)

// conditionJSON is a condition as -o json prints it, in Kubernetes' shape.
type conditionJSON struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"`
	Reason             string    `json:"reason"`
	Message            string    `json:"message"`
	LastTransitionTime time.Time `json:"lastTransitionTime"`
	ObservedGeneration int64     `json:"observedGeneration"`
}

// conditionList is a resource's conditions in -o json.
type conditionList []conditionJSON

func toConditionsJSON(r domain.Resource) conditionList {
	conds := domain.Conditions(r)
	out := make(conditionList, len(conds))
	for i, c := range conds {
		out[i] = conditionJSON{
			Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: c.Message,
			LastTransitionTime: c.LastTransitionTime.UTC(), ObservedGeneration: c.ObservedGeneration,
		}
	}
	return out
}

// labelsJSON is a resource's labels in -o json: an object, {} when there are none.
type labelsJSON map[string]string

func toLabelsJSON(l map[string]string) labelsJSON {
	if l == nil {
		return labelsJSON{}
	}
	return labelsJSON(l)
}
