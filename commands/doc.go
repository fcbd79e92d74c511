// Package commands will hold the command envelope, the registry of command
// handlers and the dispatcher that loads an aggregate, decides and appends
// with the command id (see docs/architecture.md). It is empty until the
// write path lands.
package commands
