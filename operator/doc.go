// Package operator holds the operator's tools on a running pipeline, built
// on the composition root (package eventpipe: its Catalog, Endpoints and
// Open* constructors):
//
//   - Status, where the pipeline stands (relays, consumer groups and
//     their lag, poison topics, parked events, sagas, the latest operator
//     actions), and its page: StatusPageReader and MountStatusPage, which
//     `eventpipe serve` mounts on the write side
//     (eventpipe.WriteSideConfig.OperatorRoutes);
//   - the poison topics: PoisonTopics, PoisonList, PoisonShow and
//     PoisonRedrive;
//   - the parked events of the read and search models: ParkedList,
//     ParkedReapply (re-apply parked events once the cause is fixed)
//     and ParkedSkip;
//   - the sagas' instances: SagaInstances, SagaInstance, SagaAbort and
//     SagaRetry;
//   - Recalculate, which recalculates aggregates' STATE items from their
//     logs, and AnalyticsRecount, which recounts a closed range of the
//     analytics from its raw events;
//   - the operator actions the tools that change something record
//     (OperatorActions);
//   - Replay, which rebuilds a read or search model from the event store
//     and swaps it in.
//
// Each operation has one word, in code, commands, logs and docs alike
// (docs/architecture.md, "Words"): replay rebuilds a model, redrive
// publishes a poisoned message again, re-apply applies parked events
// again, retry retries a saga's stuck effects.
//
// The eventpipe binary's commands (status, poison, parked, sagas,
// recalculate, analytics recount, replay) are built on it. The
// composition root never imports it.
package operator
