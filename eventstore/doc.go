// Package eventstore holds the domain side of eventpipe's event log: the
// event Envelope and its JSON codec (used unchanged by the store, the relay,
// the bus and every consumer), the Store interface an adapter implements,
// the typed errors callers test with errors.Is / errors.As, the schema
// (known event types and upcasters), and the facet API of rules (pure
// reducers) that keep an aggregate's current STATE beside its events and
// publish OUTBOUND events through the same transaction.
//
// A domain declares each event type with the Go type of its payload
// (DefineEvent) and registers its rules from those definitions (OnEvent
// and its siblings, NewProcessor), so that a payload of the wrong type
// does not compile; a rule refuses an event with a RuleRejection whose
// Code (RejectWith) callers match with errors.Is.
//
// Rules see the state and one event. A HistoryRule (Processor.HistoryRules)
// also sees the aggregate's events (History): the stored ones before the
// event (Past), the others of its append (New, Index). A FoldRule
// (Processor.FoldRules) sees the past as a Fold's accumulator instead,
// which a facet keeps in its snapshots, so that a command reads the
// latest snapshot and the events after it rather than the whole log.
// Reading the past costs reads, so only Facet.Recalculate,
// Facet.AppendWithHistory and Facet.Load do it; Facet.Append reads only
// STATE, and tells a history rule so (PastLoaded false), which refuses
// with ErrPastNotLoaded when it needs the past (a fold rule always does).
//
// The package imports no AWS code; eventstore/dynamodb is the adapter.
// eventstore/memstore keeps the same contract in memory, for tests and
// local experiments only, and eventstore/storetest is the contract test
// suite both pass (and a Store of your own can run).
//
// Vocabulary: an aggregate is identified by a Ref (type and id); its
// version is the sequence number of its last event (0 before the first);
// every event carries the next sequence number, so the log of one
// aggregate has no gap and no duplicate.
package eventstore
