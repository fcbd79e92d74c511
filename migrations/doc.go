// Package migrations holds the definitions of eventpipe's storage: DynamoDB
// tables in migrations/dynamodb (applied by `eventpipe migrate`), the KMS
// key of the data subjects' keys in migrations/kms, and room for the read
// models' Postgres schema in migrations/postgres.
package migrations
