package postgres

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/berth-dev/berth/domain"
)

// hostRoomSQL checks, in a transaction that has written reservations adding $3[i] slots to
// host $2[i] of provisioner $1, that no such host now holds more than its $4[i] slots, and
// fails with a check violation of slot_host_room naming the first that does
// (berth_host_has_room, 0025). It runs after the writes: their trigger has updated each
// host's row of slot_host_usage, so the transaction holds that row's lock until it ends, and
// a statement of its own sees in the row every reservation committed by the time it took the
// lock, with its own. What it reads is so what the host will hold when the transaction
// commits: a reservation of another transaction waits for the lock, and then makes the same
// check on what this one committed. Each host is looked up by key (LATERAL, OFFSET 0), so
// that a cached plan reads as many usage rows as the transaction has hosts.
const hostRoomSQL = `
	SELECT bool_and(berth_host_has_room($1, a.host, u.slots - a.added, a.added, a.slots))
	  FROM unnest($2::text[], $3::bigint[], $4::bigint[]) AS a(host, added, slots),
	       LATERAL (SELECT s.slots FROM slot_host_usage s WHERE s.provisioner = $1 AND s.host = a.host OFFSET 0) AS u`

// maxRoomTries bounds how many times a reservation made the usual way is picked and written
// in a transaction of its own (after its group's, when the group failed) while the host it
// picked keeps filling before it commits: each refusal means another reservation of the host
// committed meanwhile, so a reservation that loses this often in a row fails its attempt, to
// be retried with the attempt's backoff.
const maxRoomTries = 16

// errHostFilled is why a transaction's reservations are given up: a host its pick chose
// filled, with reservations committed after the usage the pick was shown was read, before
// the transaction could write there.
var errHostFilled = errors.New("a host filled between the pick and the reservation")

// roomRefusal returns err as errHostFilled when it is hostRoomSQL's refusal, naming the host
// and what it lacks, and err otherwise.
func roomRefusal(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23514" && pgErr.ConstraintName == "slot_host_room" {
		return fmt.Errorf("%w: %s", errHostFilled, pgErr.Message)
	}
	return err
}

// hostsAdded is what a transaction's reservations add to each host of one provisioner, and
// the host's room (domain.SlotRequest.HostSlots): the least any of the requests that added to
// it gives, each having asked once its pick ran.
type hostsAdded struct {
	added map[string]int64
	slots map[string]int64
}

func newHostsAdded() hostsAdded {
	return hostsAdded{added: make(map[string]int64), slots: make(map[string]int64)}
}

// write records req's reservation written on host, where the resource held current (nil:
// none): on the same host only the growth is added.
func (h hostsAdded) write(req domain.SlotRequest, current *domain.Reservation, host string) {
	add := int64(req.Slots)
	if current != nil && current.Host == host {
		add -= int64(current.Slots)
	}
	h.added[host] += add
	room := int64(req.HostSlots(host))
	if known, ok := h.slots[host]; !ok || room < known {
		h.slots[host] = room
	}
}

// queueCheck queues hostRoomSQL for the hosts the transaction added slots to, in host order;
// it queues nothing when it added none (a shrink, or no write).
func (h hostsAdded) queueCheck(b *pgx.Batch, provisioner string) {
	var hosts []string
	var added, slots []int64
	for _, host := range slices.Sorted(maps.Keys(h.added)) {
		if h.added[host] > 0 {
			hosts, added, slots = append(hosts, host), append(added, h.added[host]), append(slots, h.slots[host])
		}
	}
	if len(hosts) > 0 {
		b.Queue(hostRoomSQL, provisioner, hosts, added, slots)
	}
}
