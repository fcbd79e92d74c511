package dynamodb

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/privacy"
)

// SubjectKeysTable is the definition of the data subjects' keys table
// (package privacy: each scope's wrapped key, each subject's scopes, the
// forgotten subjects' tombstones), keyed by pk (hash) and sk (range),
// on-demand billing, no stream (a key never travels) and no TTL (a key
// lives until its subject is forgotten, and a tombstone for ever).
func SubjectKeysTable(name string) *ddb.CreateTableInput {
	return &ddb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(privacy.AttrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(privacy.AttrSK), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(privacy.AttrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(privacy.AttrSK), KeyType: types.KeyTypeRange},
		},
	}
}

// CreateSubjectKeysTable makes sure the keys table `name` exists as
// SubjectKeysTable defines it and is ACTIVE. An existing table with other
// keys is an error, never changed. Running it again is a no-op.
func CreateSubjectKeysTable(ctx context.Context, client API, name string) error {
	return ensureKeyedTable(ctx, client, SubjectKeysTable(name), "subject keys table")
}
