package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/ddbattr"
)

// State returns ref's STATE item (strongly consistent), or
// eventstore.ErrAggregateNotFound.
func (s *Store) State(ctx context.Context, ref eventstore.Ref) (eventstore.Stored, error) {
	return s.stored(ctx, ref, SKState, eventstore.DocumentState)
}

// Snapshot returns ref's #SNAPSHOT item (strongly consistent), or
// eventstore.ErrAggregateNotFound when none was taken.
func (s *Store) Snapshot(ctx context.Context, ref eventstore.Ref) (eventstore.Stored, error) {
	return s.stored(ctx, ref, SKSnapshot, eventstore.DocumentSnapshot)
}

func (s *Store) stored(ctx context.Context, ref eventstore.Ref, sk, op string) (eventstore.Stored, error) {
	it, err := s.getItem(ctx, ref, sk)
	if err != nil {
		return eventstore.Stored{}, fmt.Errorf("%s %s: %w", op, ref, err)
	}
	st, err := storedFromItem(it)
	if err != nil {
		return eventstore.Stored{}, fmt.Errorf("%s %s: %s: %w", op, ref, sk, err)
	}
	if s.cfg.Sealer != nil {
		if st.Data, err = s.cfg.Sealer.OpenDocument(ctx, ref, op, st.Data); err != nil {
			return eventstore.Stored{}, fmt.Errorf("%s %s: %w", op, ref, err)
		}
	}
	return st, nil
}

// PutSnapshot writes st as ref's #SNAPSHOT unless the stored one is at
// the same or a later sequence (then it writes nothing and returns nil).
// It returns eventstore.ErrAggregateNotFound when st.Seq is above ref's
// version (or ref does not exist): a snapshot never runs ahead of the log.
// The check and the write are two requests; a snapshot is a cache, and
// the sequence condition keeps it from moving backwards.
func (s *Store) PutSnapshot(ctx context.Context, ref eventstore.Ref, st eventstore.Stored) error {
	if err := ref.Validate(); err != nil {
		return fmt.Errorf("put snapshot %s: %w", ref, err)
	}
	if err := st.Validate(); err != nil {
		return fmt.Errorf("put snapshot %s: %w", ref, err)
	}
	v, err := s.Version(ctx, ref)
	if err != nil {
		return fmt.Errorf("put snapshot: %w", err)
	}
	if st.Seq > v {
		return fmt.Errorf("put snapshot %s: seq %d is beyond version %d: %w", ref, st.Seq, v, eventstore.ErrAggregateNotFound)
	}
	if st.UpdatedAt.IsZero() {
		st.UpdatedAt = time.Now()
	}
	if s.cfg.Sealer != nil {
		if st.Data, err = s.cfg.Sealer.SealDocument(ctx, ref, eventstore.DocumentSnapshot, st.Data); err != nil {
			return fmt.Errorf("put snapshot %s: seal: %w", ref, err)
		}
	}
	it := stateItem(ref, SKSnapshot, st)
	if err := checkSnapshotItem(it); err != nil {
		return fmt.Errorf("put snapshot %s: %w", ref, err)
	}
	_, err = s.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.cfg.Table),
		Item:                      it,
		ConditionExpression:       aws.String("attribute_not_exists(pk) OR seq < :seq"),
		ExpressionAttributeValues: item{":seq": ddbattr.N(st.Seq)},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("put snapshot %s: %w", ref, err)
	}
	return nil
}

// CheckSnapshotLimits checks a valid snapshot st of ref against
// DynamoDB's item size limit, as PutSnapshot does before writing: an item
// over MaxItemSize is eventstore.ErrItemTooLarge. For stores that promise
// the same limits (eventstore/memstore).
func CheckSnapshotLimits(ref eventstore.Ref, st eventstore.Stored) error {
	if st.UpdatedAt.IsZero() {
		st.UpdatedAt = time.Now()
	}
	return checkSnapshotItem(stateItem(ref, SKSnapshot, st))
}

func checkSnapshotItem(it item) error {
	if n := ItemSize(it); n > MaxItemSize {
		return fmt.Errorf("%w: snapshot is %d bytes, limit %d", eventstore.ErrItemTooLarge, n, MaxItemSize)
	}
	return nil
}
