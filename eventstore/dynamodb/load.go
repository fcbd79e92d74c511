package dynamodb

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/ddbattr"
)

// Load returns every event of ref after afterSeq, in sequence order and
// upcast to current schema versions (load an aggregate with afterSeq 0, load from a version above). It
// reads with ConsistentRead, following DynamoDB's pages until the end; use
// LoadPage to bound memory. With afterSeq 0 and no event it returns
// eventstore.ErrAggregateNotFound.
func (s *Store) Load(ctx context.Context, ref eventstore.Ref, afterSeq int64) ([]eventstore.Envelope, error) {
	var all []eventstore.Envelope
	for {
		page, err := s.query(ctx, ref, afterSeq, 0)
		if err != nil {
			return nil, err
		}
		all = append(all, page.events...)
		if !page.more {
			break
		}
		afterSeq = page.events[len(page.events)-1].Sequence
	}
	if len(all) == 0 && afterSeq == 0 {
		return nil, fmt.Errorf("load %s: %w", ref, eventstore.ErrAggregateNotFound)
	}
	return all, nil
}

// LoadPage returns at most limit events of ref after afterSeq (limit 0:
// Config.PageSize), upcast, read strongly consistently. The next page
// starts after the last event returned; fewer than limit events (or none)
// means the end of the log at the time of the read. With afterSeq 0 and
// no event it returns eventstore.ErrAggregateNotFound.
func (s *Store) LoadPage(ctx context.Context, ref eventstore.Ref, afterSeq int64, limit int) ([]eventstore.Envelope, error) {
	if limit <= 0 {
		limit = s.cfg.PageSize
	}
	var out []eventstore.Envelope
	for len(out) < limit {
		page, err := s.query(ctx, ref, afterSeq, limit-len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, page.events...)
		if !page.more || len(page.events) == 0 {
			break
		}
		afterSeq = page.events[len(page.events)-1].Sequence
	}
	if len(out) == 0 && afterSeq == 0 {
		return nil, fmt.Errorf("load %s: %w", ref, eventstore.ErrAggregateNotFound)
	}
	return out, nil
}

type eventPage struct {
	events []eventstore.Envelope
	more   bool
}

// query reads one DynamoDB page of events with sk in (EVENT#afterSeq, EVENT#max].
func (s *Store) query(ctx context.Context, ref eventstore.Ref, afterSeq int64, limit int) (eventPage, error) {
	if err := ref.Validate(); err != nil {
		return eventPage{}, fmt.Errorf("load %s: %w", ref, err)
	}
	if afterSeq < 0 {
		return eventPage{}, fmt.Errorf("load %s: %w", ref, &eventstore.ValidationError{Field: "after_seq", Reason: fmt.Sprintf("is %d, want ≥ 0", afterSeq)})
	}
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.cfg.Table),
		ConsistentRead:         aws.Bool(true),
		KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :lo AND :hi"),
		ExpressionAttributeValues: item{
			":pk": ddbattr.S(PartitionKey(ref)),
			":lo": ddbattr.S(EventSK(afterSeq + 1)),
			":hi": ddbattr.S(EventSK(eventstore.MaxSequence)),
		},
	}
	if limit > 0 {
		in.Limit = aws.Int32(int32(limit))
	}
	out, err := s.cfg.Client.Query(ctx, in)
	if err != nil {
		return eventPage{}, fmt.Errorf("load %s: %w", ref, err)
	}
	page := eventPage{more: len(out.LastEvaluatedKey) > 0, events: make([]eventstore.Envelope, 0, len(out.Items))}
	for _, it := range out.Items {
		e, err := s.decodeEvent(ctx, it)
		if err != nil {
			return eventPage{}, fmt.Errorf("load %s: %w", ref, err)
		}
		page.events = append(page.events, e)
	}
	return page, nil
}

// decodeEvent decodes and upcasts an EVENT item, then opens its personal
// fields (Config.Sealer).
func (s *Store) decodeEvent(ctx context.Context, it map[string]types.AttributeValue) (eventstore.Envelope, error) {
	e, err := EnvelopeFromItem(it)
	if err != nil {
		return e, fmt.Errorf("%s %s: %w", getOptS(it, AttrPK), getOptS(it, AttrSK), err)
	}
	if e, err = s.cfg.Schema.Upcasters.Upcast(e); err != nil || s.cfg.Sealer == nil {
		return e, err
	}
	opened, err := s.cfg.Sealer.OpenEvent(ctx, e)
	if err != nil {
		return e, fmt.Errorf("open %s: %w", e, err)
	}
	return opened, nil
}

// Version returns ref's current version from its #METADATA item,
// read strongly consistently, or eventstore.ErrAggregateNotFound.
func (s *Store) Version(ctx context.Context, ref eventstore.Ref) (int64, error) {
	it, err := s.getItem(ctx, ref, SKMetadata)
	if err != nil {
		return 0, fmt.Errorf("version %s: %w", ref, err)
	}
	v, err := getN(it, AttrCurrentSeq)
	if err != nil {
		return 0, fmt.Errorf("version %s: #METADATA: %w", ref, err)
	}
	return v, nil
}

// getItem reads one item of ref's partition strongly consistently;
// a missing item is eventstore.ErrAggregateNotFound.
func (s *Store) getItem(ctx context.Context, ref eventstore.Ref, sk string) (item, error) {
	if err := ref.Validate(); err != nil {
		return nil, err
	}
	out, err := s.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.cfg.Table),
		Key:            item{AttrPK: ddbattr.S(PartitionKey(ref)), AttrSK: ddbattr.S(sk)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	if len(out.Item) == 0 {
		return nil, fmt.Errorf("%s: %w", sk, eventstore.ErrAggregateNotFound)
	}
	return out.Item, nil
}
