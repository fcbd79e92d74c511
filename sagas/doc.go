// Package sagas will hold process managers that react to events from
// several aggregates by sending commands (see docs/architecture.md). It is
// empty until the sagas land.
package sagas
