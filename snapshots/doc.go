// Package snapshots keeps aggregates' #SNAPSHOT items fresh, off the
// write path (seed 000: "snapshot every N events").
//
// A Consumer reads the events topics of the aggregate types it is given,
// in its own consumer group (<prefix>snapshots), and for every event whose
// sequence is a multiple of N (Config.Every, per type EveryByType) calls
// that type's commands.SnapshotFunc: load the latest snapshot plus the
// later events through the rules, store the result as the new snapshot.
// No command waits for it.
//
// What reads a snapshot is eventstore.Facet.Load, the event-sourcing way
// of loading an aggregate, and so the consumer's own next snapshot,
// which starts from the previous one (Facet.Snapshot): with fresh
// snapshots they replay at most about N events instead of the whole log.
// The command handlers (commands.NewFacetHandler) start from the
// aggregate's STATE item, which every append keeps current, whatever the
// length of the log. The one write path that reads snapshots is that of a
// facet whose history rules all fold (eventstore.FoldRule):
// Facet.AppendWithHistory starts from the folds the snapshot holds beside
// the state (or from those it kept in memory from its previous append to
// the aggregate) and reads only the events after them, so for those
// domains the snapshots keep a command's cost from growing with the log.
// A facet with plain history rules reads the aggregate's whole log on
// every command and its Load ignores the snapshot; commands.FacetDomain
// gives such a domain no snapshot function.
//
// A snapshot is taken at the aggregate's current version, which may be
// past the event that triggered it when the consumer lags; the consumer
// remembers the latest sequence it snapshotted per aggregate, so the
// triggers a snapshot already covers (a backlog holding many events of
// one aggregate) are acked without any I/O: one snapshot for many
// triggers.
//
// Crash safety and idempotence come from the store: PutSnapshot never
// moves a snapshot backwards nor past the log, so a redelivered event, a
// second consumer or a restart only snapshots again. A failing snapshot
// is retried with back-off (bus.Middlewares); one that can never succeed
// (the rules reject a stored event, the state does not decode, the
// aggregate is not in the store), or whose transient failures outlast
// Config.GiveUpAfter, returns a *FailedError: its message goes to the
// poison topic (<prefix>poison.snapshots) with the reason, is logged, and
// its partition moves on. The aggregate's next trigger tries again.
package snapshots
