// Package rollups keeps roll-ups of event streams in Postgres: named
// counters per hourly and daily UTC bucket (orders per hour, revenue per
// day), added up with package rollup, the aggregation code the analytics
// consumer shares.
//
// A roll-up is a Definition: a name, the aggregate and event types it
// reads, and a Measure function that says what one event adds (counts,
// sums). New makes it a projection for projections.Applier, and so for
// everything a Postgres read model gets (register it on the catalogue
// with AddReadModel): its own consumer group, catch-up from the store,
// exactly-once effects (the sums and the positions per aggregate commit
// in one transaction, so a duplicate or a redelivery is never counted
// twice), gap repair, replay. It is a projections.BatchProjection: the
// events of a transaction are added up in memory and written with one
// INSERT … ON CONFLICT DO UPDATE statement, whatever their number.
//
// Each roll-up owns one table, rollup_<name> ('-' in the name becomes
// '_'), of rows (period, bucket, measure, value), and brings the
// migration that creates it (projections.Migrator): eventpipe.Migrate
// creates it, and a replay builds a fresh one in its shadow schema and
// swaps it in. One table per roll-up rather than one shared by all is
// what lets a replay rebuild one roll-up alone: a replay swaps whole
// tables.
//
// Read returns a roll-up's buckets over a time range; ParseQuery reads
// that range from URL parameters for an HTTP endpoint. Orders is the
// built-in roll-up of the order events.
package rollups
