// Package testkit is for tests: given/when/then fixtures that check a
// team's own domains, sagas and search models in milliseconds, with no
// DynamoDB, Kafka, Postgres or Elasticsearch running. It is not meant
// for production code.
//
//   - DomainFixture runs a commands.Domain's real command handlers
//     (Domain.NewHandlers, through a commands.Dispatcher) on the
//     in-memory event store of package eventstore/memstore: given the
//     aggregate's past events, when a command, then the events it
//     appended, its refusal (commands.Status and reason) or the outbound
//     events its rules published.
//   - SagaFixture steps a saga (sagas.Definition) through its pure core
//     (sagas.Pure), keeping what the Runner keeps in Postgres (instances,
//     pending timeouts, the commands each step sent) in memory: given
//     inputs, when one more, then the commands sent, the cancels, the
//     timeouts scheduled and whether the instance finished.
//   - FoldFixture folds events through a search model's own
//     elastic.Projection.Apply, as the Applier does before it writes:
//     given events, then documents.
//
// Payloads and expected values are compared as JSON (object keys in any
// order). A json.RawMessage, []byte or string is taken as JSON text;
// anything else is encoded with encoding/json. A failed check reports
// what was expected, what happened and a line diff of the two. Every
// fixture takes a testing.TB, so it works in tests and benchmarks.
package testkit
