// Package memstore is an in-memory eventstore.Store for tests and local
// experiments, never for production: everything it holds lives in the
// process and is gone when it exits.
//
// It keeps the contract of the DynamoDB store (eventstore/dynamodb), which
// package eventstore/storetest checks of both: appends with expected
// versions and *eventstore.ConcurrencyError, every part of an
// AppendRequest (events, version, STATE, OUTBOUND records, command record)
// written atomically or not at all, command records answering duplicates
// and refusals (first writer wins, records expire after
// Config.CommandRetention), snapshots that never move backwards, upcasting
// through Config.Schema on every read, and DynamoDB's own size limits
// (dynamodb.CheckAppendLimits) and bad-input errors, checked before
// anything is written. It also has the DynamoDB store's extra reads
// (ListByType, CountByType, ListAggregates, LoadPage) and, standing in for
// the table's stream, an ordered change feed (Changes, Wait) for an
// in-process relay.
//
// A Store is safe for concurrent use: one lock serialises every write, so
// appends racing on one aggregate see exactly one winner per version.
package memstore
