package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/disks"
)

// Voter is one voter of the controller quorum: a node id and its actor
// address.
type Voter struct {
	ID      int32
	Address string
}

func (v Voter) String() string { return fmt.Sprintf("%d@%s", v.ID, v.Address) }

// QuorumSettings tune the controller quorum and each node's session with
// the active controller. Zero fields take the controller's defaults.
type QuorumSettings struct {
	// TickInterval is raft's tick; ElectionTicks its election timeout in
	// ticks. Defaults 100 ms and 10.
	TickInterval  time.Duration
	ElectionTicks int
	// HeartbeatInterval and SessionTimeout are a node's session. Defaults
	// 2 s and 9 s, near Kafka's.
	HeartbeatInterval time.Duration
	SessionTimeout    time.Duration
	// SnapshotEvery is the number of metadata log entries between
	// snapshots. Default 1000.
	SnapshotEvery uint64
	// LeaderRebalanceInterval is how often the active controller makes
	// preferred replicas leaders again where they can lead (Kafka's
	// auto.leader.rebalance.enable); default 30 s, negative never.
	LeaderRebalanceInterval time.Duration
}

// ParseVoters parses --controllers: comma-separated ID@HOST:PORT entries,
// as Kafka's controller.quorum.voters.
func ParseVoters(s string) ([]Voter, error) {
	var out []Voter
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		idText, addr, ok := strings.Cut(entry, "@")
		if !ok {
			return nil, fmt.Errorf("%q: want ID@HOST:PORT", entry)
		}
		id, err := strconv.ParseInt(idText, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%q: node id %q is not a number", entry, idText)
		}
		if _, _, err := splitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%q: address %q: %w", entry, addr, err)
		}
		out = append(out, Voter{ID: int32(id), Address: addr})
	}
	if len(out) == 0 {
		return nil, errors.New("no voter named")
	}
	return out, nil
}

// validateVoters checks the voter list: positive, distinct ids and
// addresses, and this node, if listed, at its own listen address.
func validateVoters(voters []Voter, self int32, listen string) error {
	ids := map[int32]bool{}
	addrs := map[string]bool{}
	var errs []error
	for _, v := range voters {
		if v.ID <= 0 {
			errs = append(errs, fmt.Errorf("controllers: %s: node ids start at 1", v))
		}
		if ids[v.ID] {
			errs = append(errs, fmt.Errorf("controllers: node %d is named twice", v.ID))
		}
		if addrs[v.Address] {
			errs = append(errs, fmt.Errorf("controllers: address %s is named twice", v.Address))
		}
		ids[v.ID], addrs[v.Address] = true, true
		if v.ID == self && v.Address != listen {
			errs = append(errs, fmt.Errorf("controllers: this node %d is named at %s but listens on %s", self, v.Address, listen))
		}
	}
	return errors.Join(errs...)
}

// voterMap is the voters as the controller takes them.
func voterMap(voters []Voter) map[int32]string {
	if len(voters) == 0 {
		return nil
	}
	out := make(map[int32]string, len(voters))
	for _, v := range voters {
		out[v.ID] = v.Address
	}
	return out
}

// quorumOfOne reports whether the node is a cluster by itself.
func (c Config) quorumOfOne() bool {
	return len(c.Controllers) == 0 || (len(c.Controllers) == 1 && c.Controllers[0].ID == c.NodeID)
}

// clusterID is the cluster the node's directories belong to, "" when none
// has joined one; directories that disagree are an error.
func clusterID(props map[string]disks.MetaProperties) (string, error) {
	id := ""
	paths := slices.Sorted(maps.Keys(props))
	first := ""
	for _, path := range paths {
		mp := props[path]
		if mp.ClusterID == "" {
			continue
		}
		if id != "" && mp.ClusterID != id {
			return "", fmt.Errorf("node: %s belongs to cluster %s but %s to cluster %s", first, id, path, mp.ClusterID)
		}
		id, first = mp.ClusterID, path
	}
	return id, nil
}

// saveClusterID records the cluster's id in the meta.properties of every
// directory of the node.
func (n *Node) saveClusterID(id string) error {
	var errs []error
	for path := range n.props {
		if err := disks.SetClusterID(n.cfg.FS, path, n.cfg.NodeID, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// WaitRegistered waits until the node is registered with the cluster's
// active controller and unfenced, or the cluster refused it (its data dir
// belongs to another cluster, or its id is held by a live node).
func (n *Node) WaitRegistered(ctx context.Context) error {
	for {
		res, err := actors.Request[*actors.Registration](ctx, n.system.Root, n.metadata, &actors.AwaitRegistration{}, time.Second)
		if err == nil {
			return res.Err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("node %d not registered with the cluster: %w", n.cfg.NodeID, ctx.Err())
		}
	}
}
