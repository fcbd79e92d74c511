// Package projections will hold the projection framework: consumers that
// build read models from the event topics, exactly once, with gap repair,
// catch-up and replay (see docs/architecture.md). It is empty until the
// read side lands.
package projections
