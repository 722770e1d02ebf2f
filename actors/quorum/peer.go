package quorum

import (
	"errors"
	"fmt"
	"runtime/debug"
	"slices"

	"github.com/sirupsen/logrus"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Defaults and limits of a Peer.
const (
	// DefaultElectionTick is Config.ElectionTick's default: ticks without
	// hearing from a leader before a follower campaigns (raft randomises it
	// between once and twice that).
	DefaultElectionTick = 10
	// DefaultHeartbeatTick is Config.HeartbeatTick's default: ticks between
	// a leader's heartbeats.
	DefaultHeartbeatTick = 1
	// DefaultSnapshotEvery is Config.SnapshotEvery's default.
	DefaultSnapshotEvery = 1000
	// maxSizePerMsg bounds the entries of one append message (raft's
	// MaxSizePerMsg): well under the transport's 4 MiB.
	maxSizePerMsg = 1 << 20
	// maxInflightMsgs is how many append messages a leader sends a
	// follower before hearing back (raft's MaxInflightMsgs).
	maxInflightMsgs = 256
	// maxUncommittedEntriesSize bounds the bytes of entries a leader holds
	// uncommitted; proposals past it are dropped with
	// raft.ErrProposalDropped.
	maxUncommittedEntriesSize = 64 << 20
	// catchUpDivisor sets how many entries before a snapshot stay in memory
	// after it: SnapshotEvery/catchUpDivisor, so a follower a little behind
	// gets entries rather than the whole snapshot.
	catchUpDivisor = 10
)

// StateMachine is what a Peer applies committed entries to. Its methods
// are called from the Peer's methods (Handle and NewPeer), never
// concurrently.
type StateMachine interface {
	// Apply applies the data of the committed normal entry at index. Raft's
	// own empty entries (appended by each new leader) are not given to it.
	Apply(index uint64, data []byte)
	// Snapshot returns the whole state, as of the last index applied.
	Snapshot() ([]byte, error)
	// Restore replaces the whole state with a snapshot's data.
	Restore(data []byte) error
}

// Config is what a Peer needs.
type Config struct {
	// ID is this node's raft id; not zero.
	ID uint64
	// Storage is the peer's durable storage; the Peer uses it but does not
	// close it.
	Storage *Storage
	// Voters is the initial voter set. It is used only when Storage is
	// empty and ID is among them: the peer then writes that configuration
	// as the first entries of its log. A node not among them starts with an
	// empty log and configuration, as a learner that a leader adds
	// (AddLearner) and brings up to date.
	Voters []uint64
	// ElectionTick is the number of Ticks a follower waits to hear from a
	// leader before campaigning; more than HeartbeatTick. Default
	// DefaultElectionTick (10).
	ElectionTick int
	// HeartbeatTick is the number of Ticks between a leader's heartbeats.
	// Default DefaultHeartbeatTick (1).
	HeartbeatTick int
	// SnapshotEvery is how many entries are applied between snapshots; each
	// snapshot compacts the log. Default DefaultSnapshotEvery (1000).
	SnapshotEvery uint64
	// Logger receives the peer's and raft's logs. Default: discards.
	Logger *logrus.Entry
	// StateMachine receives committed entries and snapshots.
	StateMachine StateMachine
}

// Peer drives one raft.RawNode over a Storage and a StateMachine, following
// raft's Ready contract literally: Handle persists each Ready's hard state,
// entries and snapshot durably, then collects its messages, then applies
// its committed entries, then Advances. It owns the RawNode; the Storage
// and the StateMachine are given to it.
//
// It has no goroutine and no timer: the owner calls Tick at its tick
// interval, Step for each message from another node, and Handle after
// either or after a proposal, and sends what Handle returns. Messages of
// type MsgSnap carry the snapshot and need ReportSnapshot once delivered or
// lost.
//
// A failed write of the storage, a failing state machine, or a panic of
// raft (which panics when it finds its state impossible) fails the Peer:
// every later call returns an error wrapping ErrPeerFailed, and the node
// must be restarted from its storage.
//
// Not safe for concurrent use: the actor that owns it serialises access.
type Peer struct {
	id            uint64
	storage       *Storage
	sm            StateMachine
	rn            *raft.RawNode
	logger        *logrus.Entry
	snapshotEvery uint64

	// confState is the configuration as of applied.
	confState *raftpb.ConfState
	// applied is the index of the last entry applied, or of the snapshot
	// restored.
	applied uint64
	// snapshotIndex is the index of the storage's latest snapshot.
	snapshotIndex uint64
	bootstrapped  bool
	// leader is the leader last seen, for logging changes.
	leader uint64
	// strangers are the senders outside the configuration whose messages
	// were dropped since it last changed: each is logged once at Warn.
	strangers map[uint64]bool

	err error // why the Peer failed, wrapping ErrPeerFailed
}

// NewPeer starts a peer on cfg.Storage. The state machine is restored from
// the storage's snapshot, if any; the entries committed after it are
// applied again by the first Handles. With an empty storage and cfg.ID
// among cfg.Voters, it bootstraps the voters' configuration.
func NewPeer(cfg Config) (*Peer, error) {
	if cfg.ID == 0 {
		return nil, errors.New("quorum: peer id 0")
	}
	if cfg.Storage == nil || cfg.StateMachine == nil {
		return nil, errors.New("quorum: peer without storage or state machine")
	}
	if cfg.ElectionTick == 0 {
		cfg.ElectionTick = DefaultElectionTick
	}
	if cfg.HeartbeatTick == 0 {
		cfg.HeartbeatTick = DefaultHeartbeatTick
	}
	if cfg.HeartbeatTick < 0 || cfg.ElectionTick <= cfg.HeartbeatTick {
		return nil, fmt.Errorf("quorum: election tick %d must be more than heartbeat tick %d, itself positive", cfg.ElectionTick, cfg.HeartbeatTick)
	}
	if cfg.SnapshotEvery == 0 {
		cfg.SnapshotEvery = DefaultSnapshotEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = discardLogger()
	}
	voters := slices.Clone(cfg.Voters)
	slices.Sort(voters)
	voters = slices.Compact(voters)
	if slices.Contains(voters, 0) {
		return nil, errors.New("quorum: voter id 0")
	}

	p := &Peer{
		id:            cfg.ID,
		storage:       cfg.Storage,
		sm:            cfg.StateMachine,
		logger:        cfg.Logger,
		snapshotEvery: cfg.SnapshotEvery,
	}
	snap, err := cfg.Storage.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("quorum: start peer: %w", err)
	}
	_, cs, err := cfg.Storage.InitialState()
	if err != nil {
		return nil, fmt.Errorf("quorum: start peer: %w", err)
	}
	p.confState = cloneConfState(cs)
	if !raft.IsEmptySnap(snap) {
		if err := p.sm.Restore(snap.GetData()); err != nil {
			return nil, fmt.Errorf("quorum: restore the state machine from the snapshot at index %d: %w", snap.GetMetadata().GetIndex(), err)
		}
		p.applied = snap.GetMetadata().GetIndex()
		p.snapshotIndex = p.applied
	}

	empty := cfg.Storage.Empty()
	rc := &raft.Config{
		ID:                        cfg.ID,
		ElectionTick:              cfg.ElectionTick,
		HeartbeatTick:             cfg.HeartbeatTick,
		Storage:                   cfg.Storage,
		Applied:                   p.applied,
		MaxSizePerMsg:             maxSizePerMsg,
		MaxInflightMsgs:           maxInflightMsgs,
		MaxUncommittedEntriesSize: maxUncommittedEntriesSize,
		CheckQuorum:               true,
		PreVote:                   true,
		StepDownOnRemoval:         true,
		Logger:                    raftLogger{cfg.Logger},
	}
	if err := p.guard("start", func() error {
		rn, err := raft.NewRawNode(rc)
		if err != nil {
			return err
		}
		p.rn = rn
		if empty && slices.Contains(voters, cfg.ID) {
			peers := make([]raft.Peer, len(voters))
			for i, id := range voters {
				peers[i] = raft.Peer{ID: id}
			}
			if err := rn.Bootstrap(peers); err != nil {
				return err
			}
			p.bootstrapped = true
			p.confState = raftpb.EnsureConfState(&raftpb.ConfState{Voters: voters})
		}
		return nil
	}); err != nil {
		return nil, err
	}
	p.logger.WithFields(logrus.Fields{
		"raft_id":      p.id,
		"voters":       p.Voters(),
		"learners":     p.Learners(),
		"applied":      p.applied,
		"term":         p.Term(),
		"bootstrapped": p.bootstrapped,
	}).Info("raft peer started")
	return p, nil
}

// guard runs f, turning a panic of raft into an error that fails the
// Peer.
func (p *Peer) guard(op string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			p.err = fmt.Errorf("%w: raft panicked in %s: %v", ErrPeerFailed, op, r)
			p.logger.WithField("stack", string(debug.Stack())).WithError(p.err).Error("raft peer failed")
			err = p.err
		}
	}()
	return f()
}

// fail fails the Peer for err and returns the error its calls give.
func (p *Peer) fail(err error) error {
	if p.err == nil {
		p.err = fmt.Errorf("%w: %w", ErrPeerFailed, err)
		p.logger.WithError(err).Error("raft peer failed")
	}
	return p.err
}

// Tick advances raft's clock by one tick: heartbeats, elections and the
// leader's quorum check are counted in ticks. Call Handle after it.
func (p *Peer) Tick() {
	if p.err != nil {
		return
	}
	_ = p.guard("tick", func() error {
		p.rn.Tick()
		return nil
	})
}

// Step gives raft a message from another node. A message for another node
// gives ErrWrongRecipient, one from a node that is not a voter or learner
// of the current configuration ErrNotMember (logged at Warn, once per
// sender until the configuration changes; a node whose configuration is
// still empty, a new learner, takes messages from any node). Both are
// dropped. Call Handle after it.
func (p *Peer) Step(m *raftpb.Message) error {
	if p.err != nil {
		return p.err
	}
	if m.GetTo() != p.id {
		return fmt.Errorf("%w: %s to %d, this is %d", ErrWrongRecipient, m.GetType(), m.GetTo(), p.id)
	}
	if !p.isMember(m.GetFrom()) {
		entry := p.logger.WithFields(logrus.Fields{"from": m.GetFrom(), "type": m.GetType().String(), "term": m.GetTerm()})
		if p.strangers[m.GetFrom()] {
			entry.Debug("dropped a raft message from a node outside the configuration")
		} else {
			entry.Warn("dropped a raft message from a node outside the configuration; more from it are logged at Debug")
			if p.strangers == nil {
				p.strangers = map[uint64]bool{}
			}
			p.strangers[m.GetFrom()] = true
		}
		return fmt.Errorf("%w: %s from %d", ErrNotMember, m.GetType(), m.GetFrom())
	}
	return p.guard("step", func() error { return p.rn.Step(m) })
}

// isMember reports whether id is a voter or learner of the configuration,
// or whether the configuration is empty.
func (p *Peer) isMember(id uint64) bool {
	cs := p.confState
	if len(cs.GetVoters()) == 0 && len(cs.GetVotersOutgoing()) == 0 {
		return true
	}
	return p.IsMember(id)
}

// Propose proposes data as a new entry; a follower forwards it to the
// leader. It returns raft.ErrProposalDropped when there is no leader, a
// leadership transfer is under way or the leader holds too much
// uncommitted; a proposal may also be lost without error (a leader change
// drops uncommitted entries), so callers retry until they see it applied.
// Empty data gives ErrEmptyProposal, more than MaxEntryBytes ErrTooLarge.
func (p *Peer) Propose(data []byte) error {
	if p.err != nil {
		return p.err
	}
	if len(data) == 0 {
		return ErrEmptyProposal
	}
	if len(data) > MaxEntryBytes {
		return fmt.Errorf("%w: a proposal of %d bytes, more than %d", ErrTooLarge, len(data), MaxEntryBytes)
	}
	return p.guard("propose", func() error { return p.rn.Propose(data) })
}

// ProposeConfChange proposes a configuration change, applied once
// committed. Raft refuses one while an earlier change is not yet applied.
func (p *Peer) ProposeConfChange(cc *raftpb.ConfChangeV2) error {
	if p.err != nil {
		return p.err
	}
	return p.guard("propose conf change", func() error { return p.rn.ProposeConfChange(cc) })
}

// AddLearner proposes adding node id as a learner: it receives the log and
// applies it, but neither votes nor counts towards the quorum.
func (p *Peer) AddLearner(id uint64) error {
	return p.ProposeConfChange(&raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{
		{Type: raftpb.ConfChangeAddLearnerNode.Enum(), NodeId: new(id)},
	}})
}

// Handle processes every Ready raft has, in order, until it has none: it
// makes the hard state, entries and snapshot durable in the storage (a
// snapshot from the leader is restored into the state machine), applies
// the committed entries (normal ones to the state machine, configuration
// changes to raft), takes a snapshot and compacts the log when
// SnapshotEvery entries were applied since the last, and advances raft. It
// returns the messages to send, every one of them allowed by what is
// durable.
func (p *Peer) Handle() (out []*raftpb.Message, err error) {
	if p.err != nil {
		return nil, p.err
	}
	err = p.guard("handle", func() error {
		for p.rn.HasReady() {
			rd := p.rn.Ready()
			if err := p.persist(rd); err != nil {
				return p.fail(err)
			}
			out = append(out, rd.Messages...)
			if err := p.apply(rd.CommittedEntries); err != nil {
				return p.fail(err)
			}
			if err := p.maybeSnapshot(); err != nil {
				return p.fail(err)
			}
			if rd.SoftState != nil && rd.SoftState.Lead != p.leader {
				p.leader = rd.SoftState.Lead
				p.logger.WithFields(logrus.Fields{"leader": p.leader, "term": p.Term(), "state": rd.SoftState.RaftState.String()}).Info("raft leader changed")
			}
			p.rn.Advance(rd)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// persist makes a Ready's snapshot, entries and hard state durable, and
// restores a snapshot into the state machine.
func (p *Peer) persist(rd raft.Ready) error {
	if !raft.IsEmptySnap(rd.Snapshot) {
		md := rd.Snapshot.GetMetadata()
		if err := p.storage.ApplySnapshot(rd.Snapshot); err != nil {
			return err
		}
		if err := p.sm.Restore(rd.Snapshot.GetData()); err != nil {
			return fmt.Errorf("restore the state machine from the snapshot at index %d: %w", md.GetIndex(), err)
		}
		p.applied, p.snapshotIndex = md.GetIndex(), md.GetIndex()
		p.confState = cloneConfState(md.GetConfState())
		p.strangers = nil
		p.logger.WithFields(logrus.Fields{"index": md.GetIndex(), "term": md.GetTerm(), "voters": p.Voters(), "learners": p.Learners()}).Info("restored a raft snapshot from the leader")
	}
	return p.storage.Save(rd.HardState, rd.Entries, rd.MustSync)
}

// apply applies committed entries in order.
func (p *Peer) apply(entries []*raftpb.Entry) error {
	for _, e := range entries {
		index := e.GetIndex()
		if index <= p.applied {
			continue
		}
		switch e.GetType() {
		case raftpb.EntryNormal:
			if len(e.GetData()) > 0 {
				p.sm.Apply(index, e.GetData())
			}
		case raftpb.EntryConfChange:
			var cc raftpb.ConfChange
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				return fmt.Errorf("configuration change at index %d: %w", index, err)
			}
			p.applyConfChange(index, &cc)
		case raftpb.EntryConfChangeV2:
			var cc raftpb.ConfChangeV2
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				return fmt.Errorf("configuration change at index %d: %w", index, err)
			}
			p.applyConfChange(index, &cc)
		}
		p.applied = index
	}
	return nil
}

func (p *Peer) applyConfChange(index uint64, cc raftpb.ConfChangeI) {
	p.confState = cloneConfState(p.rn.ApplyConfChange(cc))
	p.strangers = nil
	p.logger.WithFields(logrus.Fields{"index": index, "voters": p.Voters(), "learners": p.Learners()}).Info("raft configuration changed")
}

// maybeSnapshot takes a snapshot at the applied index once SnapshotEvery
// entries were applied since the last, and compacts the log in memory but
// for the entries a follower a little behind may still need.
func (p *Peer) maybeSnapshot() error {
	if p.applied < p.snapshotIndex+p.snapshotEvery {
		return nil
	}
	data, err := p.sm.Snapshot()
	if err != nil {
		return fmt.Errorf("snapshot of the state machine at index %d: %w", p.applied, err)
	}
	if _, err := p.storage.CreateSnapshot(p.applied, p.confState, data); err != nil {
		return err
	}
	p.snapshotIndex = p.applied
	if keep := p.snapshotEvery / catchUpDivisor; p.applied > keep {
		return p.storage.Compact(p.applied - keep)
	}
	return nil
}

// ID is this node's raft id.
func (p *Peer) ID() uint64 { return p.id }

// Leader is the id of the leader this node knows of, 0 when none.
func (p *Peer) Leader() uint64 { return p.rn.BasicStatus().Lead }

// Term is the node's current term.
func (p *Peer) Term() uint64 { return p.rn.BasicStatus().GetTerm() }

// IsLeader reports whether this node is the leader.
func (p *Peer) IsLeader() bool { return p.rn.BasicStatus().RaftState == raft.StateLeader }

// Applied is the index of the last entry applied to the state machine (or
// of the snapshot it was restored from).
func (p *Peer) Applied() uint64 { return p.applied }

// Voters returns the voters of the configuration as of the applied index,
// sorted (in a joint configuration, the incoming ones).
func (p *Peer) Voters() []uint64 { return sortedIDs(p.confState.GetVoters()) }

// Learners returns the learners of the configuration as of the applied
// index, sorted.
func (p *Peer) Learners() []uint64 { return sortedIDs(p.confState.GetLearners()) }

func sortedIDs(ids []uint64) []uint64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// Status is raft's status of this node; on the leader it has every
// follower's progress.
func (p *Peer) Status() raft.Status { return p.rn.Status() }

// Bootstrapped reports whether NewPeer found the storage empty and wrote
// the initial voters' configuration to it.
func (p *Peer) Bootstrapped() bool { return p.bootstrapped }

// ReportUnreachable tells raft that the last message to node id could not
// be sent: the leader stops pipelining to it and probes.
func (p *Peer) ReportUnreachable(id uint64) {
	if p.err == nil {
		_ = p.guard("report unreachable", func() error {
			p.rn.ReportUnreachable(id)
			return nil
		})
	}
}

// ReportSnapshot tells raft whether the snapshot sent to node id arrived
// (raft.SnapshotFinish) or was lost (raft.SnapshotFailure): after a
// failure the leader probes the node again, and sends a snapshot again if
// it still needs one. Without a report of a lost snapshot the leader sends
// the node nothing but heartbeats until the node acknowledges it.
func (p *Peer) ReportSnapshot(id uint64, status raft.SnapshotStatus) {
	if p.err == nil {
		_ = p.guard("report snapshot", func() error {
			p.rn.ReportSnapshot(id, status)
			return nil
		})
	}
}

// TransferLeadership asks the leader to hand leadership to node to, a
// voter: it brings to up to date and tells it to campaign. On a follower it
// is forwarded to the leader.
func (p *Peer) TransferLeadership(to uint64) {
	if p.err == nil {
		_ = p.guard("transfer leadership", func() error {
			p.rn.TransferLeader(to)
			return nil
		})
	}
}

// Campaign makes this node campaign at once, without waiting an election
// timeout: for a quorum of one, which need not wait to hear from anyone.
// Call Handle after it.
func (p *Peer) Campaign() error {
	if p.err != nil {
		return p.err
	}
	return p.guard("campaign", func() error { return p.rn.Campaign() })
}

// IsMember reports whether node id is a voter or learner of the
// configuration as of the last entry applied.
func (p *Peer) IsMember(id uint64) bool {
	cs := p.confState
	return slices.Contains(cs.GetVoters(), id) || slices.Contains(cs.GetVotersOutgoing(), id) ||
		slices.Contains(cs.GetLearners(), id) || slices.Contains(cs.GetLearnersNext(), id)
}
