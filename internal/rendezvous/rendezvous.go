// Package rendezvous assigns keys to nodes by rendezvous (highest random weight) hashing:
// every process that knows the same nodes assigns a key to the same node without talking
// to the others, and when a node joins or leaves only the keys that node wins or held move.
//
// A node's weight for a key is xxhash64 of the node, a zero byte and the key. xxhash takes
// no seed, so the weights are the same in every process and every release of Berth that
// keeps this function: agents of different builds sharing a store must agree on them.
package rendezvous

import "github.com/cespare/xxhash/v2"

// Owner returns the node of nodes with the highest weight for key, or "" when nodes is
// empty. A tie (equal weights, as good as impossible) goes to the node first in byte order,
// so the answer does not depend on the order the nodes are given in.
func Owner(nodes []string, key string) string {
	var owner string
	var best uint64
	for i, node := range nodes {
		w := weight(node, key)
		if i == 0 || w > best || (w == best && node < owner) {
			owner, best = node, w
		}
	}
	return owner
}

// weight is node's weight for key. The separator keeps ("ab", "c") apart from ("a", "bc").
func weight(node, key string) uint64 {
	d := xxhash.New()
	_, _ = d.WriteString(node)
	_, _ = d.Write([]byte{0})
	_, _ = d.WriteString(key)
	return d.Sum64()
}
