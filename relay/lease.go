package relay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attributes of a lease item. migrations/dynamodb creates the lease table
// with AttrStreamARN as hash key and AttrShardID as range key.
const (
	AttrStreamARN  = "stream_arn"
	AttrShardID    = "shard_id"
	attrParent     = "parent_shard_id"
	attrOwner      = "owner"
	attrCounter    = "lease_counter"
	attrCheckpoint = "checkpoint"
	attrFinished   = "finished"
	attrUpdatedAt  = "updated_at"
)

// ErrLeaseLost is returned when a conditional lease write fails because
// another worker took the lease, or it changed since it was read.
var ErrLeaseLost = errors.New("relay: lease lost")

// Lease is one shard's lease item: who reads the shard, and how far its
// records are on the bus.
type Lease struct {
	StreamARN     string
	ShardID       string
	ParentShardID string // "" when the shard has no parent
	// Owner is the worker id holding the lease, "" when free.
	Owner string
	// Counter goes up on every take, renewal and checkpoint. A lease
	// whose counter stays put for the lease duration is expired.
	Counter int64
	// Checkpoint is the sequence number of the last record published,
	// "" when nothing was: reading resumes after it.
	Checkpoint string
	// Finished is set when the shard is closed and read to its end.
	Finished  bool
	UpdatedAt time.Time
}

// LeaseAPI is the part of *dynamodb.Client the lease table needs.
type LeaseAPI interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Leases reads and writes the lease items of one table. Every write is
// conditional, so two workers never both believe they hold a shard past
// their next write, and a worker that lost its lease can never move the
// checkpoint.
type Leases struct {
	Client LeaseAPI
	Table  string
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func (l *Leases) key(stream, shard string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrStreamARN: s(stream), AttrShardID: s(shard)}
}

// Ensure creates a free lease for the shard unless one exists.
func (l *Leases) Ensure(ctx context.Context, stream, shard, parent string) error {
	it := l.key(stream, shard)
	it[attrCounter] = n(0)
	it[attrFinished] = &types.AttributeValueMemberBOOL{Value: false}
	it[attrUpdatedAt] = s(time.Now().UTC().Format(time.RFC3339Nano))
	if parent != "" {
		it[attrParent] = s(parent)
	}
	_, err := l.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(l.Table),
		Item:                it,
		ConditionExpression: aws.String("attribute_not_exists(#shard)"),
		ExpressionAttributeNames: map[string]string{
			"#shard": AttrShardID,
		},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("relay: create lease for shard %s: %w", shard, err)
	}
	return nil
}

// List returns every lease of the stream, read strongly consistently.
func (l *Leases) List(ctx context.Context, stream string) ([]Lease, error) {
	var out []Lease
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(l.Table),
		KeyConditionExpression:    aws.String("#stream = :stream"),
		ExpressionAttributeNames:  map[string]string{"#stream": AttrStreamARN},
		ExpressionAttributeValues: map[string]types.AttributeValue{":stream": s(stream)},
		ConsistentRead:            aws.Bool(true),
	}
	p := dynamodb.NewQueryPaginator(l.Client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("relay: list leases of %s in %s: %w", stream, l.Table, err)
		}
		for _, it := range page.Items {
			lease, err := leaseFromItem(it)
			if err != nil {
				return nil, fmt.Errorf("relay: lease table %s: %w", l.Table, err)
			}
			out = append(out, lease)
		}
	}
	return out, nil
}

// Take makes owner the holder of lease, provided nobody wrote it since it
// was read (its counter is unchanged). It returns the lease as written or
// ErrLeaseLost.
func (l *Leases) Take(ctx context.Context, lease Lease, owner string) (Lease, error) {
	return l.update(ctx, lease, "take", "#counter = :counter",
		"SET #owner = :me, #counter = :next, #updated = :now", map[string]types.AttributeValue{":me": s(owner)},
		func(next *Lease) { next.Owner = owner })
}

// Steal makes owner the holder of lease, provided lease.Owner still
// holds it and the shard is not finished, whatever the holder wrote since
// the lease was read: a busy holder writes its leases every few seconds
// (renewals, checkpoints), and a steal conditional on the counter would
// lose that race whenever the lease table answers slowly. The holder
// notices at its next write, which fails with ErrLeaseLost. It returns the
// lease as written or ErrLeaseLost.
func (l *Leases) Steal(ctx context.Context, lease Lease, owner string) (Lease, error) {
	values := map[string]types.AttributeValue{
		":me":     s(owner),
		":holder": s(lease.Owner),
		":false":  &types.AttributeValueMemberBOOL{Value: false},
	}
	return l.write(ctx, lease, "steal", "#owner = :holder AND #finished = :false",
		"SET #owner = :me, #counter = #counter + :one, #updated = :now", values,
		func(next *Lease) { next.Owner = owner })
}

// Renew proves the holder is alive: it raises the counter, provided the
// lease is still held by lease.Owner at lease.Counter.
func (l *Leases) Renew(ctx context.Context, lease Lease) (Lease, error) {
	return l.update(ctx, lease, "renew", "#owner = :me AND #counter = :counter",
		"SET #counter = :next, #updated = :now", map[string]types.AttributeValue{":me": s(lease.Owner)}, nil)
}

// Checkpoint records that every record up to sequence number seq is on
// the bus (and, with finished, that the shard is read to its end). It
// also renews the lease. It fails with ErrLeaseLost when the lease moved.
func (l *Leases) Checkpoint(ctx context.Context, lease Lease, seq string, finished bool) (Lease, error) {
	values := map[string]types.AttributeValue{
		":me":       s(lease.Owner),
		":finished": &types.AttributeValueMemberBOOL{Value: finished},
	}
	update := "SET #counter = :next, #updated = :now, #finished = :finished"
	if seq != "" {
		values[":seq"] = s(seq)
		update += ", #checkpoint = :seq"
	}
	return l.update(ctx, lease, "checkpoint", "#owner = :me AND #counter = :counter", update, values,
		func(next *Lease) {
			if seq != "" {
				next.Checkpoint = seq
			}
			next.Finished = finished
		})
}

// Release frees a held lease so another worker can take it at once.
func (l *Leases) Release(ctx context.Context, lease Lease) error {
	_, err := l.update(ctx, lease, "release", "#owner = :me AND #counter = :counter",
		"SET #counter = :next, #updated = :now REMOVE #owner", map[string]types.AttributeValue{":me": s(lease.Owner)},
		func(next *Lease) { next.Owner = "" })
	return err
}

// update writes lease on the condition cond, which may use :counter
// (the counter as read) and sets the counter to :next (one more).
func (l *Leases) update(ctx context.Context, lease Lease, op, cond, update string, values map[string]types.AttributeValue, apply func(*Lease)) (Lease, error) {
	values[":counter"] = n(lease.Counter)
	values[":next"] = n(lease.Counter + 1)
	return l.write(ctx, lease, op, cond, update, values, apply)
}

// write runs one conditional UpdateItem of lease's item and returns the
// lease as written: its counter raised by one, UpdatedAt now and apply's
// changes. A failed condition is ErrLeaseLost. The update may use :now
// and :one.
func (l *Leases) write(ctx context.Context, lease Lease, op, cond, update string, values map[string]types.AttributeValue, apply func(*Lease)) (Lease, error) {
	now := time.Now().UTC()
	values[":now"] = s(now.Format(time.RFC3339Nano))
	if strings.Contains(update, ":one") {
		values[":one"] = n(1)
	}
	names := map[string]string{"#counter": attrCounter, "#updated": attrUpdatedAt}
	for _, name := range []struct{ placeholder, attr string }{
		{"#owner", attrOwner}, {"#checkpoint", attrCheckpoint}, {"#finished", attrFinished},
	} {
		// DynamoDB rejects names the expressions do not use.
		if strings.Contains(cond+" "+update, name.placeholder) {
			names[name.placeholder] = name.attr
		}
	}
	out, err := l.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(l.Table),
		Key:                       l.key(lease.StreamARN, lease.ShardID),
		ConditionExpression:       aws.String(cond),
		UpdateExpression:          aws.String(update),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllNew,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return lease, fmt.Errorf("%w: %s of shard %s (owner %q, counter %d)", ErrLeaseLost, op, lease.ShardID, lease.Owner, lease.Counter)
	}
	if err != nil {
		return lease, fmt.Errorf("relay: %s lease of shard %s: %w", op, lease.ShardID, err)
	}
	if written, err := leaseFromItem(out.Attributes); err == nil {
		// The item as written: after a steal, the holder's latest
		// checkpoint and counter rather than those read before.
		return written, nil
	}
	next := lease
	next.Counter++
	next.UpdatedAt = now
	if apply != nil {
		apply(&next)
	}
	return next, nil
}

func leaseFromItem(it map[string]types.AttributeValue) (Lease, error) {
	str := func(name string) string {
		if v, ok := it[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	lease := Lease{
		StreamARN:     str(AttrStreamARN),
		ShardID:       str(AttrShardID),
		ParentShardID: str(attrParent),
		Owner:         str(attrOwner),
		Checkpoint:    str(attrCheckpoint),
	}
	if lease.StreamARN == "" || lease.ShardID == "" {
		return Lease{}, errors.New("lease item without stream_arn or shard_id")
	}
	if v, ok := it[attrCounter].(*types.AttributeValueMemberN); ok {
		c, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			return Lease{}, fmt.Errorf("lease of shard %s: counter %q: %w", lease.ShardID, v.Value, err)
		}
		lease.Counter = c
	}
	if v, ok := it[attrFinished].(*types.AttributeValueMemberBOOL); ok {
		lease.Finished = v.Value
	}
	if t, err := time.Parse(time.RFC3339Nano, str(attrUpdatedAt)); err == nil {
		lease.UpdatedAt = t
	}
	return lease, nil
}
