package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ensureTable creates the table def when it is missing, waits until it is
// ACTIVE, refuses an existing table that differs from def (matchDefinition)
// before changing anything, enables TTL on ttlAttr and enables def's
// stream when the table has none.
func ensureTable(ctx context.Context, client API, def *ddb.CreateTableInput, ttlAttr string) error {
	name := aws.ToString(def.TableName)
	desc, err := describe(ctx, client, name)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", name, err)
	}
	if desc == nil {
		_, err := client.CreateTable(ctx, def)
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("migrate %s: create table: %w", name, err)
		}
		slog.Default().InfoContext(ctx, "created table", "table", name)
	}
	if desc, err = waitActive(ctx, client, name); err != nil {
		return fmt.Errorf("migrate %s: %w", name, err)
	}
	if err := matchDefinition(desc, def); err != nil {
		return fmt.Errorf("migrate %s: existing table differs from the definition: %w", name, err)
	}
	// enableTTL refuses a TTL on another attribute before changing it.
	if err := enableTTL(ctx, client, name, ttlAttr); err != nil {
		return err
	}
	if s := desc.StreamSpecification; def.StreamSpecification != nil && (s == nil || !aws.ToBool(s.StreamEnabled)) {
		if _, err := client.UpdateTable(ctx, &ddb.UpdateTableInput{TableName: aws.String(name), StreamSpecification: def.StreamSpecification}); err != nil {
			return fmt.Errorf("migrate %s: enable stream: %w", name, err)
		}
		slog.Default().InfoContext(ctx, "enabled stream", "table", name)
		if _, err = waitActive(ctx, client, name); err != nil {
			return fmt.Errorf("migrate %s: %w", name, err)
		}
	}
	return nil
}

// matchDefinition reports how an existing table differs from def in what
// cannot be changed in place: its key schema, the key schema and
// projection of def's global secondary indexes (others may exist), and
// the view type of an enabled stream (NEW_AND_OLD_IMAGES serves where
// NEW_IMAGE is wanted).
func matchDefinition(d *types.TableDescription, def *ddb.CreateTableInput) error {
	if err := sameKeys(d.KeySchema, keyTypes(def.KeySchema)); err != nil {
		return fmt.Errorf("key schema: %w", err)
	}
	for _, want := range def.GlobalSecondaryIndexes {
		name := aws.ToString(want.IndexName)
		i := slices.IndexFunc(d.GlobalSecondaryIndexes, func(g types.GlobalSecondaryIndexDescription) bool {
			return aws.ToString(g.IndexName) == name
		})
		if i < 0 {
			return fmt.Errorf("index %s is missing", name)
		}
		got := d.GlobalSecondaryIndexes[i]
		if err := sameKeys(got.KeySchema, keyTypes(want.KeySchema)); err != nil {
			return fmt.Errorf("index %s: %w", name, err)
		}
		if got.Projection == nil || got.Projection.ProjectionType != want.Projection.ProjectionType {
			return fmt.Errorf("index %s does not project %s", name, want.Projection.ProjectionType)
		}
	}
	s, want := d.StreamSpecification, def.StreamSpecification
	if s == nil || want == nil || !aws.ToBool(s.StreamEnabled) || s.StreamViewType == want.StreamViewType {
		return nil
	}
	if want.StreamViewType == types.StreamViewTypeNewImage && s.StreamViewType == types.StreamViewTypeNewAndOldImages {
		return nil
	}
	return fmt.Errorf("stream has view type %s, want %s", s.StreamViewType, want.StreamViewType)
}

func keyTypes(schema []types.KeySchemaElement) map[string]types.KeyType {
	m := make(map[string]types.KeyType, len(schema))
	for _, k := range schema {
		m[aws.ToString(k.AttributeName)] = k.KeyType
	}
	return m
}

// ensureKeyedTable creates the table def when it is missing and waits
// until it is ACTIVE; an existing table whose key schema is not def's is
// an error, never changed. For the tables without stream, index or TTL
// (what ensureTable adds to this); kind names the table in the log and
// errors.
func ensureKeyedTable(ctx context.Context, client API, def *ddb.CreateTableInput, kind string) error {
	name := aws.ToString(def.TableName)
	desc, err := describe(ctx, client, name)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", name, err)
	}
	if desc == nil {
		_, err := client.CreateTable(ctx, def)
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("migrate %s: create table: %w", name, err)
		}
		slog.Default().InfoContext(ctx, "created "+kind, "table", name)
	}
	if desc, err = waitActive(ctx, client, name); err != nil {
		return fmt.Errorf("migrate %s: %w", name, err)
	}
	if err := sameKeys(desc.KeySchema, keyTypes(def.KeySchema)); err != nil {
		return fmt.Errorf("migrate %s: existing table differs from the %s definition: key schema: %w", name, kind, err)
	}
	return nil
}
