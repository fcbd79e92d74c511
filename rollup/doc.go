// Package rollup is the aggregation code shared by every roll-up in
// eventpipe: time buckets (hourly and daily, UTC), named counters added
// up in memory per batch, and HyperLogLog sketches of distinct values
// (github.com/axiomhq/hyperloglog, precision 14: a standard error of
// 0.81%, and exact in practice below a few thousand values while the
// sketch is sparse).
//
// A consumer folds a batch of events into a Rollup (Add), then writes
// each Cell once: one write per bucket per batch, never one per event.
// The analytics aggregation consumer (analytics/aggregator) writes the
// cells to DynamoDB; projections/rollups writes them to Postgres. How a
// writer makes its write idempotent is its own business; this package
// only adds up.
package rollup
