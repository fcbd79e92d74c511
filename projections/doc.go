// Package projections turns events into read models, exactly once in
// effect although delivery is at least once.
//
// An Applier applies events to a Postgres read model inside one
// transaction together with the projection's position per aggregate
// (table projection_positions, see migrations/postgres): an event at or
// below the position is a duplicate and skipped; an event more than one
// past it means events were missed, and the missing ones are read from
// the event store (Store.Load) and applied first, in order. Because the
// position and the rows commit together, a crash at any point either
// keeps both or neither.
//
// A projection's Apply queues the statements of one event. A
// BatchProjection (a roll-up, see projections/rollups) is handed all the
// events of a transaction at once instead, so that it can add them up in
// memory and write one statement per transaction rather than one per
// event; skipping, repair and positions are the same.
package projections
