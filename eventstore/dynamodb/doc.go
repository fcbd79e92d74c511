// Package dynamodb is the DynamoDB adapter of eventstore: a single-table
// event log with the facets' STATE and OUTBOUND items in the same
// partition. docs/eventstore.md describes the layout and access patterns.
//
// Table layout (create it with migrations/dynamodb.CreateEventsTable):
//
//	pk                          sk                          what
//	AGGREGATE#<type>#<id>       #METADATA                   currentSeq: the aggregate's version; gsi1pk AGGREGATE_TYPE#<type>, gsi1sk <id>
//	AGGREGATE#<type>#<id>       EVENT#<seq, 12 digits>      one event; gsi1pk EVENT_TYPE#<type>, gsi1sk EVENT#<ulid>
//	AGGREGATE#<type>#<id>       STATE                       the facet's current state (JSON) at seq; rev, its revision
//	AGGREGATE#<type>#<id>       #SNAPSHOT                   the latest snapshot (JSON) at seq
//	AGGREGATE#<type>#<id>       OUTBOUND#<seq>#<index>      an outbound event published by a rule
//	AGGREGATE#<type>#<id>       COMMAND#<command id>        the recorded answer to a command: what it appended, or its refusal (status, reason, code)
//	EVENTPIPE#INDEX             AGGREGATE_TYPE              the record that IndexAggregates ran
//
// The envelope's fields are top-level attributes of an EVENT item (the
// payload as a JSON string), so the table stream's NEW_IMAGE decodes with
// EnvelopeFromItem and an OUTBOUND image with OutboundFromItem.
//
// Access patterns (docs/eventstore.md): append with Store.Append; load an
// aggregate, or from a version, with Store.Load and Store.LoadPage
// (strongly consistent); the latest snapshot with Store.Snapshot; the
// current version with Store.Version; events of a type across aggregates
// with Store.ListByType (gsi1, ULID order, opaque cursor, optional time
// range); the aggregates of a type with Store.ListAggregates (gsi1, id
// order, a page at a time); every change through the table's stream.
package dynamodb
