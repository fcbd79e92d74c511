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
//     ParkedReplay and ParkedSkip;
//   - the sagas' instances: SagaInstances, SagaInstance, SagaAbort and
//     SagaRetry;
//   - Recalculate, which rebuilds aggregates' STATE from their logs, and
//     AnalyticsRecount, which recounts a closed range of the analytics;
//   - the operator actions the tools that change something record
//     (OperatorActions);
//   - Replay, which rebuilds a read or search model from the event store.
//
// The eventpipe binary's commands (status, poison, parked, sagas,
// recalculate, analytics recount, replay) are built on it. The
// composition root never imports it.
package operator
