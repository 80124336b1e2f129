package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/berth-dev/berth/domain"
)

// usageMemo is the slot usage the group transactions' one-transaction provisions read, kept
// as they change it: the slots on each host of a provisioner, read once, and each owner's
// resources on them, read once per owner. It gives the rows backend.HostUsageSQL would
// read. It is exact: a group's transaction holds the file's write lock, so only the group's
// own writes change the usage meanwhile; a provision adds its reservation once it has
// succeeded (its savepoint then stays), and every other write forgets all of it (committer),
// since it may have reserved or released anything. Between groups it is kept only while
// nothing else wrote the file (writeMark). Reading the usage for each provision was a sixth
// of the writer's time per runtime.
type usageMemo struct {
	hosts  map[string]*hostSlots // by provisioner
	owners map[usageKey]map[string]int
}

// hostSlots is a provisioner's slot_host_usage rows: the hosts in order, and their slots.
type hostSlots struct {
	order []string
	slots map[string]int
}

// usageKey is an owner of a provisioner.
type usageKey struct{ provisioner, owner string }

// usage returns req's host usage as committed so far in tx: every host of req's provisioner
// that holds a reservation, in host order, with its slots and how many of req's owner's
// resources it holds.
func (m *usageMemo) usage(ctx context.Context, tx *sql.Tx, req domain.SlotRequest) ([]domain.HostUsage, error) {
	hosts, err := m.hostSlots(ctx, tx, req.Provisioner)
	if err != nil {
		return nil, err
	}
	owned, err := m.ownerResources(ctx, tx, usageKey{req.Provisioner, req.Owner})
	if err != nil {
		return nil, err
	}
	usage := make([]domain.HostUsage, len(hosts.order))
	for i, host := range hosts.order {
		usage[i] = domain.HostUsage{Host: host, UsedSlots: hosts.slots[host], OwnerResources: owned[host]}
	}
	return usage, nil
}

func (m *usageMemo) hostSlots(ctx context.Context, tx *sql.Tx, provisioner string) (*hostSlots, error) {
	if hosts, ok := m.hosts[provisioner]; ok {
		return hosts, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT host, slots FROM slot_host_usage WHERE provisioner = $1 ORDER BY host`, provisioner)
	if err != nil {
		return nil, fmt.Errorf("read the hosts' slots: %w", err)
	}
	hosts := &hostSlots{slots: make(map[string]int)}
	if _, err := collectRows(rows, func(row rowScanner) (struct{}, error) {
		var host string
		var slots int
		err := row.Scan(&host, &slots)
		hosts.order = append(hosts.order, host)
		hosts.slots[host] = slots
		return struct{}{}, err
	}); err != nil {
		return nil, fmt.Errorf("read the hosts' slots: %w", err)
	}
	if m.hosts == nil {
		m.hosts = make(map[string]*hostSlots)
	}
	m.hosts[provisioner] = hosts
	return hosts, nil
}

func (m *usageMemo) ownerResources(ctx context.Context, tx *sql.Tx, key usageKey) (map[string]int, error) {
	if owned, ok := m.owners[key]; ok {
		return owned, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT host, resources FROM slot_owner_usage WHERE provisioner = $1 AND owner = $2`, key.provisioner, key.owner)
	if err != nil {
		return nil, fmt.Errorf("read the owner's resources on each host: %w", err)
	}
	owned := make(map[string]int)
	if _, err := collectRows(rows, func(row rowScanner) (struct{}, error) {
		var host string
		var resources int
		err := row.Scan(&host, &resources)
		owned[host] = resources
		return struct{}{}, err
	}); err != nil {
		return nil, fmt.Errorf("read the owner's resources on each host: %w", err)
	}
	if m.owners == nil {
		m.owners = make(map[usageKey]map[string]int)
	}
	m.owners[key] = owned
	return owned, nil
}

// reserved adds res, a reservation inserted in the group's transaction and kept, to the
// usage read so far, as the usage triggers add it to the tables: its slots to its host's (a
// host new to the provisioner in host order), and one resource to its owner's count there.
func (m *usageMemo) reserved(res domain.Reservation) {
	if hosts, ok := m.hosts[res.Provisioner]; ok {
		if _, known := hosts.slots[res.Host]; !known {
			i, _ := slices.BinarySearch(hosts.order, res.Host)
			hosts.order = slices.Insert(hosts.order, i, res.Host)
		}
		hosts.slots[res.Host] += res.Slots
	}
	if owned, ok := m.owners[usageKey{res.Provisioner, res.Owner}]; ok {
		owned[res.Host]++
	}
}

// forget drops everything read, for a write whose changes to the usage are not known.
func (m *usageMemo) forget() {
	clear(m.hosts)
	clear(m.owners)
}
