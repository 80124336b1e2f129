package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/berth-dev/berth/domain"
)

// listenAnnouncedSQL LISTENs on the channel a resource created alone is announced on
// (migration 0029), whose name is a secret kept in announce_channel: it is read and used
// inside the DO block, so that no statement text the server shows (pg_stat_activity,
// pg_stat_statements) holds it. On a schema without the table, or for a role that may not
// read it, it listens on nothing: the wake-ups on changesChannel still come.
const listenAnnouncedSQL = `DO $$
BEGIN
    IF to_regclass('announce_channel') IS NOT NULL AND has_table_privilege('announce_channel', 'SELECT') THEN
        EXECUTE format('LISTEN %I', (SELECT c.name FROM announce_channel c));
    END IF;
END
$$`

// ListenAnnouncedChanges takes a connection out of the pool for good and LISTENs on it for
// the change log's wake-ups and for the announcements of resources created alone, whose rows
// it keeps for ChangedResource (see domain.ChangeAnnouncer).
func (s *State) ListenAnnouncedChanges(ctx context.Context) (domain.ChangeAnnouncer, error) {
	// The channel of the wake-ups last, so that the connection shows the same statement as
	// any other listener's.
	conn, err := s.listeningConn(ctx, "listen for changes", listenAnnouncedSQL, "LISTEN "+changesChannel)
	if err != nil {
		return nil, err
	}
	return &announcer{listener: listener{conn: conn}, rows: &s.changed}, nil
}

// announcer is a listener on changesChannel and the announcements' channel: every
// notification on another channel than changesChannel is an announcement.
type announcer struct {
	listener
	rows *changedRows
}

// Wait blocks until a notification arrives (nil), ctx ends, or the connection breaks; it
// keeps the row an announcement brings.
func (a *announcer) Wait(ctx context.Context) error {
	_, _, err := a.WaitAnnounced(ctx)
	return err
}

// WaitAnnounced implements domain.ChangeAnnouncer. An announcement it cannot read is taken
// as a bare wake-up: the entry it names is read from the log like any other.
func (a *announcer) WaitAnnounced(ctx context.Context) (domain.Change, bool, error) {
	n, err := a.wait(ctx)
	if err != nil || n.Channel == changesChannel {
		return domain.Change{}, false, err
	}
	change, row, err := decodeAnnouncement(n.Payload)
	if err != nil {
		return domain.Change{}, false, nil
	}
	a.rows.keepAnnounced(change.Seq, row)
	return change, true, nil
}

// announcement is what the trigger sends for a resource created alone: its change-log
// entry's seq and its row, as row_to_json gives it.
type announcement struct {
	Seq int64        `json:"seq"`
	Row announcedRow `json:"row"`
}

// announcedRow holds the columns of resourceColumns as row_to_json names and encodes them;
// the JSON columns are decoded as scanResource decodes them.
type announcedRow struct {
	ID                 string              `json:"id"`
	Type               domain.ResourceType `json:"type"`
	Name               string              `json:"name"`
	Owner              string              `json:"owner"`
	Provisioner        string              `json:"provisioner"`
	Args               json.RawMessage     `json:"args"`
	Generation         int64               `json:"generation"`
	ObservedGeneration int64               `json:"observed_generation"`
	Status             domain.Status       `json:"status"`
	StatusMessage      string              `json:"status_message"`
	State              json.RawMessage     `json:"state"`
	Config             json.RawMessage     `json:"config"`
	Attempts           int                 `json:"attempts"`
	NextAttemptAt      *time.Time          `json:"next_attempt_at"`
	LastError          string              `json:"last_error"`
	LeaseToken         int64               `json:"lease_token"`
	CreatedAt          time.Time           `json:"created_at"`
	UpdatedAt          time.Time           `json:"updated_at"`
	ReadyAt            *time.Time          `json:"ready_at"`
	UnhealthySince     *time.Time          `json:"unhealthy_since"`
	Labels             json.RawMessage     `json:"labels"`
	Paused             bool                `json:"paused"`
	Hibernate          bool                `json:"hibernate"`
	RetryRequestedAt   *time.Time          `json:"retry_requested_at"`
	StatusChangedAt    time.Time           `json:"status_changed_at"`
	LeaseHolder        *string             `json:"lease_holder"`
	LeaseExpiresAt     *time.Time          `json:"lease_expires_at"`
	Reason             domain.Reason       `json:"reason"`
	WaitingSince       *time.Time          `json:"waiting_since"`
	LastAttemptAt      *time.Time          `json:"last_attempt_at"`
}

// decodeAnnouncement reads an announcement's entry and row; the row is what scanResource
// would have read of it.
func decodeAnnouncement(payload string) (domain.Change, domain.Resource, error) {
	var a announcement
	if err := json.Unmarshal([]byte(payload), &a); err != nil {
		return domain.Change{}, domain.Resource{}, fmt.Errorf("read an announced change: %w", err)
	}
	in := a.Row
	if a.Seq <= 0 || in.ID == "" {
		return domain.Change{}, domain.Resource{}, fmt.Errorf("read an announced change: no seq or no id")
	}
	r := domain.Resource{
		ID: in.ID, Type: in.Type, Name: in.Name, Owner: in.Owner, Provisioner: in.Provisioner,
		Generation: in.Generation, ObservedGeneration: in.ObservedGeneration,
		Status: in.Status, Reason: in.Reason, StatusMessage: in.StatusMessage,
		StateTimes: domain.StateTimes{WaitingSince: in.WaitingSince, LastAttemptAt: in.LastAttemptAt},
		Attempts:   in.Attempts, NextAttemptAt: in.NextAttemptAt, LastError: in.LastError,
		LeaseToken: in.LeaseToken, CreatedAt: in.CreatedAt, UpdatedAt: in.UpdatedAt,
		ReadyAt: in.ReadyAt, UnhealthySince: in.UnhealthySince,
		Paused: in.Paused, Hibernate: in.Hibernate, RetryRequestedAt: in.RetryRequestedAt,
		StatusChangedAt: in.StatusChangedAt, LeaseExpiresAt: in.LeaseExpiresAt,
	}
	if in.LeaseHolder != nil {
		r.LeaseHolder = *in.LeaseHolder
	}
	decodeResourceColumns(&r, jsonColumn(in.Args), jsonColumn(in.State), jsonColumn(in.Config), jsonColumn(in.Labels))
	return domain.Change{Seq: a.Seq, ResourceID: r.ID, Owner: r.Owner}, r, nil
}

// jsonColumn is a JSON column's value as scanning it gives it: nil for SQL NULL.
func jsonColumn(raw json.RawMessage) []byte {
	if raw == nil || string(raw) == "null" {
		return nil
	}
	return raw
}
