// Package dynamodb is the DynamoDB adapter of eventstore: a single-table
// event log (seed 000) with the facet's STATE and OUTBOUND items (seed 003)
// in the same partition.
//
// Table layout (create it with migrations/dynamodb.CreateEventsTable):
//
//	pk                          sk                          what
//	AGGREGATE#<type>#<id>       #METADATA                   currentSeq: the aggregate's version
//	AGGREGATE#<type>#<id>       EVENT#<seq, 12 digits>      one event; gsi1pk EVENT_TYPE#<type>, gsi1sk EVENT#<ulid>
//	AGGREGATE#<type>#<id>       STATE                       the facet's current state (JSON) at seq
//	AGGREGATE#<type>#<id>       #SNAPSHOT                   the latest snapshot (JSON) at seq
//	AGGREGATE#<type>#<id>       OUTBOUND#<seq>#<index>      an outbound event published by a rule
//	AGGREGATE#<type>#<id>       COMMAND#<command id>        the recorded answer to a command: what it appended, or its refusal (status, reason)
//
// The envelope's fields are top-level attributes of an EVENT item (the
// payload as a JSON string), so the table stream's NEW_IMAGE decodes with
// EnvelopeFromItem and an OUTBOUND image with OutboundFromItem.
//
// Access patterns (seed 000): AP1 Store.Append; AP2/AP3 Store.Load and
// Store.LoadPage (strongly consistent); AP4 Store.Snapshot; AP5
// Store.Version; AP6 Store.ListByType (GSI1, ULID order, opaque cursor,
// optional time range); AP7 the table stream carries every item written.
package dynamodb
