package statuspage

import "time"

// Group kinds: what runs in a consumer group.
const (
	KindCommands   = "commands"   // the command handlers of one commands topic
	KindProjection = "projection" // a read or search model
	KindAggregator = "aggregator" // the analytics aggregation consumer
	KindSaga       = "saga"       // a saga
)

// Snapshot is one reading of the pipeline's status, as a Reader returns
// it. The page keeps its own types so that it does not depend on the
// package that reads the status (eventpipe fills a Snapshot from a
// StatusReport); every field may be empty.
type Snapshot struct {
	// Groups are the consumer groups, in the order to show them.
	Groups []Group `json:"groups"`
	// Relays are the relay streams with their shard leases.
	Relays []Relay `json:"relays"`
	// Sagas are the sagas' instances.
	Sagas []Saga `json:"sagas"`
	// Events has, per aggregate type, its events topic's newest offset
	// summed over the partitions (0 for a topic that does not exist yet).
	// The page derives the events rates from it; nil when the offsets
	// could not be read, and then the sample adds no rate.
	Events []EventsTopic `json:"events"`
	// OperatorActions are the latest operator actions, newest first.
	OperatorActions []OperatorAction `json:"operator_actions,omitempty"`
	// Errors say which parts could not be read.
	Errors []string `json:"errors,omitempty"`
	// Took is how long the reading took, in nanoseconds in JSON.
	Took time.Duration `json:"took_ns"`
}

// Group is one consumer group's position on its topics.
type Group struct {
	Name string `json:"name"`
	// Kind is KindCommands, KindProjection, KindAggregator, KindSaga,
	// or the kind of another consumer (snapshotter, handler, …).
	Kind   string   `json:"kind"`
	Topics []string `json:"topics"`
	// Committed sums the group's committed offsets, Newest the topics'
	// newest offsets; Lag is the records not committed yet.
	Committed int64 `json:"committed"`
	Newest    int64 `json:"newest"`
	Lag       int64 `json:"lag"`
	// PoisonTopic and Poisoned: the group's poison topic and how many
	// messages it holds.
	PoisonTopic string `json:"poison_topic"`
	Poisoned    int64  `json:"poisoned"`
	// Parked is what a projection's group parked; nil for the other kinds,
	// and for a projection when the parked events could not be counted.
	Parked *Parked `json:"parked,omitempty"`
	// Build says where a read or search model's build stands ("current",
	// a catch-up's or a rebuild's progress, a version change waiting);
	// empty for the other kinds.
	Build string `json:"build,omitempty"`
	// DefinitionChanges say what the consumer's last start changed in its
	// definition, and what is declared but not deployed yet.
	DefinitionChanges []string `json:"definition_changes,omitempty"`
}

// Parked counts a projection's parked events and the aggregates they
// belong to.
type Parked struct {
	Events     int64 `json:"events"`
	Aggregates int64 `json:"aggregates"`
}

// Relay is one relay stream (a DynamoDB table's stream) and its leases.
type Relay struct {
	Name   string  `json:"name"`
	Stream string  `json:"stream"`
	Leases []Lease `json:"leases"`
	// PoisonTopic and Poisoned: the stream's poison topic and how many
	// records it holds.
	PoisonTopic string `json:"poison_topic"`
	Poisoned    int64  `json:"poisoned"`
	// Err says why the leases could not be read.
	Err string `json:"error,omitempty"`
}

// Lease is a relay's lease on one shard of a stream.
type Lease struct {
	Shard string `json:"shard"`
	// Owner is the relay worker holding the lease, "" when free.
	Owner string `json:"owner"`
	// Checkpoint is the sequence number of the last record published.
	Checkpoint string `json:"checkpoint"`
	// Finished is set when the shard is closed and read to its end.
	Finished  bool      `json:"finished"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Saga is one saga's instances.
type Saga struct {
	Name string `json:"name"`
	// Running instances have no outcome yet; Finished counts the others
	// by outcome.
	Running  int64            `json:"running"`
	Finished map[string]int64 `json:"finished"`
	// Timeouts are pending, Overdue those already due; Effects are
	// effects not run yet.
	Timeouts int64 `json:"timeouts"`
	Overdue  int64 `json:"overdue"`
	Effects  int64 `json:"effects"`
	// Err says why the instances could not be counted.
	Err string `json:"error,omitempty"`
}

// EventsTopic is the newest offset of an aggregate type's events topic.
type EventsTopic struct {
	AggregateType string `json:"aggregate_type"`
	Topic         string `json:"topic"`
	Newest        int64  `json:"newest"`
}
