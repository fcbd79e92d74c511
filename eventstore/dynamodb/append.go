package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/ddbattr"
)

// Cancellation reason codes DynamoDB reports per item of a cancelled
// transaction.
const (
	reasonConditionFailed     = "ConditionalCheckFailed"
	reasonTransactionConflict = "TransactionConflict"
)

// seal returns req with its personal data sealed by Config.Sealer (req
// itself without one): a copy, so that the result holds the events as
// given.
func (s *Store) seal(ctx context.Context, req eventstore.AppendRequest) (eventstore.AppendRequest, error) {
	if s.cfg.Sealer == nil {
		return req, nil
	}
	out := req
	out.Events = make([]eventstore.Envelope, len(req.Events))
	for i, e := range req.Events {
		sealed, err := s.cfg.Sealer.SealEvent(ctx, e)
		if err != nil {
			return req, fmt.Errorf("seal %s: %w", e, err)
		}
		out.Events[i] = sealed
	}
	if req.State != nil {
		st, err := s.cfg.Sealer.SealDocument(ctx, req.Aggregate, eventstore.DocumentState, req.State)
		if err != nil {
			return req, fmt.Errorf("seal the state: %w", err)
		}
		out.State = st
	}
	if len(req.Outbound) > 0 {
		out.Outbound = make([]eventstore.Outbound, len(req.Outbound))
		for i, o := range req.Outbound {
			p, err := s.cfg.Sealer.SealDocument(ctx, req.Aggregate, eventstore.OutboundDocument(o.Seq, o.Index), o.Payload)
			if err != nil {
				return req, fmt.Errorf("seal outbound %s: %w", o.Name, err)
			}
			o.Payload = p
			out.Outbound[i] = o
		}
	}
	return out, nil
}

// Append writes req in one TransactWriteItems (see docs/eventstore.md): the #METADATA update
// conditional on req.ExpectedVersion (attribute_not_exists for a new
// aggregate), every event (each conditional on not existing), the STATE
// item, the OUTBOUND items and the COMMAND# record (conditional on not
// existing). Nothing is written unless all are.
//
// Before any write it validates req (*eventstore.ValidationError, against
// the configured Schema), seals its personal data (Config.Sealer: a
// forgotten subject is an error matching privacy.ErrForgotten), and
// checks DynamoDB's limits on the sealed items: more than 100 items is
// eventstore.ErrTooManyItems, an item over 400 KB eventstore.ErrItemTooLarge,
// more than 4 MB in all eventstore.ErrTransactionTooLarge.
//
// When DynamoDB cancels the transaction: a command id already recorded
// returns the original result with Duplicate set (and no error), or
// *eventstore.RefusedCommandError when it was recorded as refused; a failed
// version condition returns *eventstore.ConcurrencyError with the actual
// version (eventstore.ErrAggregateNotFound when a version above 0 was
// expected of an aggregate that does not exist); with req.IfState the
// STATE put is conditional on the revision read (attribute_not_exists
// for ""), and a STATE rewritten since is a *eventstore.ConcurrencyError
// with StateRewritten set; a TransactionConflict
// with the version unchanged is retried up to Config.ConflictRetries
// times. Every error is wrapped as "append <type>/<id>: …".
func (s *Store) Append(ctx context.Context, req eventstore.AppendRequest) (eventstore.AppendResult, error) {
	ref := req.Aggregate
	wrap := func(err error) error { return fmt.Errorf("append %s: %w", ref, err) }
	if err := req.Validate(s.cfg.Schema); err != nil {
		return eventstore.AppendResult{}, wrap(err)
	}
	sealed, err := s.seal(ctx, req)
	if err != nil {
		return eventstore.AppendResult{}, wrap(err)
	}
	tx, err := transaction(s.cfg.Table, sealed, time.Now().UTC(), s.cfg.CommandRetention)
	if err != nil {
		return eventstore.AppendResult{}, wrap(err)
	}
	if kc, ok := s.cfg.Sealer.(KeyChecker); ok {
		checks, gone := kc.KeyChecks(sealed)
		if n := len(tx.input.TransactItems) + len(checks); n > MaxTransactionItems {
			return eventstore.AppendResult{}, wrap(fmt.Errorf("%w: needs %d items with the checks of %d data keys, limit %d", eventstore.ErrTooManyItems, n, len(checks), MaxTransactionItems))
		}
		tx.keyIdx, tx.keyGone = len(tx.input.TransactItems), gone
		tx.input.TransactItems = append(tx.input.TransactItems, checks...)
	}
	for attempt := 0; ; attempt++ {
		_, err := s.cfg.Client.TransactWriteItems(ctx, tx.input)
		if err == nil {
			res := req.Result()
			res.StateRevision = tx.stateRevision
			return res, nil
		}
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) {
			return eventstore.AppendResult{}, wrap(err)
		}
		res, retry, err := s.cancelled(ctx, req, tx, tce)
		if !retry {
			if err != nil {
				return res, wrap(err)
			}
			return res, nil
		}
		if attempt >= s.cfg.ConflictRetries {
			return eventstore.AppendResult{}, wrap(fmt.Errorf("transaction conflict persisted after %d retries: %w", attempt, err))
		}
		s.cfg.Logger.DebugContext(ctx, "append conflict, retrying", "aggregate", ref.String(), "attempt", attempt+1)
		select {
		case <-ctx.Done():
			return eventstore.AppendResult{}, wrap(ctx.Err())
		case <-time.After(time.Duration(1+attempt) * time.Duration(5+rand.IntN(15)) * time.Millisecond):
		}
	}
}

// prepared is a transaction ready to send, with where its conditional
// items sit (for reading cancellation reasons).
type prepared struct {
	input         *dynamodb.TransactWriteItemsInput
	commandIdx    int    // -1 without command id
	stateIdx      int    // -1 without a STATE condition
	stateRevision string // the revision of the STATE written ("" for none)
	// keyIdx is where the checks of the data keys begin (KeyChecker);
	// keyGone the error of each one's failure.
	keyIdx  int
	keyGone []error
}

// KeyChecker is a Sealer whose data keys an append requires, in its own
// transaction, to still exist: an append sealed with a key that was
// deleted meanwhile (its subject forgotten by another process while this
// one held the key) then writes nothing. package privacy's Sealer is one.
type KeyChecker interface {
	// KeyChecks returns the condition checks that the keys sealed's
	// values were sealed with still exist, and the error of each one's
	// failure.
	KeyChecks(sealed eventstore.AppendRequest) (checks []types.TransactWriteItem, gone []error)
}

// CheckAppendLimits checks a valid req (see eventstore.AppendRequest.Validate)
// against DynamoDB's limits on the transaction Store.Append would write,
// with commands recorded for commandRetention: more than
// MaxTransactionItems items is eventstore.ErrTooManyItems, an item over
// MaxItemSize eventstore.ErrItemTooLarge, more than MaxTransactionSize in
// all eventstore.ErrTransactionTooLarge. It is Append's own check, for
// stores that promise the same limits (eventstore/memstore).
func CheckAppendLimits(req eventstore.AppendRequest, commandRetention time.Duration) error {
	_, err := transaction(DefaultTable, req, time.Now().UTC(), commandRetention)
	return err
}

// transaction builds the TransactWriteItems input of req on table and
// checks DynamoDB's limits on it.
func transaction(tableName string, req eventstore.AppendRequest, now time.Time, commandRetention time.Duration) (prepared, error) {
	ref := req.Aggregate
	count := 1 + len(req.Events) + len(req.Outbound)
	if len(req.State) > 0 {
		count++
	}
	if req.CommandID != "" {
		count++
	}
	if count > MaxTransactionItems {
		return prepared{}, fmt.Errorf("%w: needs %d items (%d events, %d outbound, plus metadata/STATE/command), limit %d",
			eventstore.ErrTooManyItems, count, len(req.Events), len(req.Outbound), MaxTransactionItems)
	}
	table := aws.String(tableName)
	items := make([]types.TransactWriteItem, 0, count)
	total := 0
	check := func(what string, it item) error {
		n := ItemSize(it)
		if n > MaxItemSize {
			return fmt.Errorf("%w: %s is %d bytes, limit %d", eventstore.ErrItemTooLarge, what, n, MaxItemSize)
		}
		total += n
		return nil
	}
	put := func(it item, cond bool) {
		p := &types.Put{TableName: table, Item: it}
		if cond {
			p.ConditionExpression = aws.String("attribute_not_exists(pk)")
		}
		items = append(items, types.TransactWriteItem{Put: p})
	}

	metaKey := item{AttrPK: ddbattr.S(PartitionKey(ref)), AttrSK: ddbattr.S(SKMetadata)}
	metaVals := item{":new": ddbattr.N(req.NewVersion()), ":now": ddbattr.S(formatTime(now)), ":t": ddbattr.S(ref.Type), ":id": ddbattr.S(ref.ID),
		":gpk": ddbattr.S(AggregateTypeKey(ref.Type))}
	cond := "attribute_not_exists(pk)"
	if req.ExpectedVersion > 0 {
		cond = "currentSeq = :expected"
		metaVals[":expected"] = ddbattr.N(req.ExpectedVersion)
	}
	if err := check("#METADATA", item{
		AttrPK: metaKey[AttrPK], AttrSK: metaKey[AttrSK], AttrCurrentSeq: metaVals[":new"],
		AttrUpdatedAt: metaVals[":now"], AttrAggregateType: metaVals[":t"], AttrAggregateID: metaVals[":id"],
		AttrGSI1PK: metaVals[":gpk"], AttrGSI1SK: metaVals[":id"],
	}); err != nil {
		return prepared{}, err
	}
	if len(req.Events) > 0 {
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName:                           table,
			Key:                                 metaKey,
			UpdateExpression:                    aws.String("SET currentSeq = :new, updatedAt = :now, aggregateType = :t, aggregateId = :id, gsi1pk = :gpk, gsi1sk = :id"),
			ConditionExpression:                 aws.String(cond),
			ExpressionAttributeValues:           metaVals,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}})
	} else {
		vals := item{":expected": ddbattr.N(req.ExpectedVersion)}
		items = append(items, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName:                           table,
			Key:                                 metaKey,
			ConditionExpression:                 aws.String("currentSeq = :expected"),
			ExpressionAttributeValues:           vals,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}})
	}
	for _, e := range req.Events {
		it := eventItem(e)
		if err := check(fmt.Sprintf("event %d (%s)", e.Sequence, e.EventType), it); err != nil {
			return prepared{}, err
		}
		put(it, true)
	}
	p := prepared{commandIdx: -1, stateIdx: -1}
	if len(req.State) > 0 {
		p.stateRevision = eventstore.NewEventID(now)
		it := stateItem(ref, SKState, eventstore.Stored{Seq: req.NewVersion(), Data: req.State, UpdatedAt: now, Revision: p.stateRevision})
		if err := check("STATE", it); err != nil {
			return prepared{}, err
		}
		if req.IfState == nil {
			put(it, false)
		} else {
			// The revision read, checked in the same transaction as the
			// version: a STATE rewritten at the same version fails it.
			sp := &types.Put{TableName: table, Item: it, ConditionExpression: aws.String("attribute_not_exists(#rev)"),
				ExpressionAttributeNames: map[string]string{"#rev": AttrStateRevision}}
			if req.IfState.Revision != "" {
				sp.ConditionExpression = aws.String("#rev = :rev")
				sp.ExpressionAttributeValues = item{":rev": ddbattr.S(req.IfState.Revision)}
			}
			p.stateIdx = len(items)
			items = append(items, types.TransactWriteItem{Put: sp})
		}
	}
	for _, o := range req.Outbound {
		it := outboundItem(o, req.Events[o.Seq-req.ExpectedVersion-1])
		if err := check(fmt.Sprintf("outbound %s (sequence %d, index %d)", o.Name, o.Seq, o.Index), it); err != nil {
			return prepared{}, err
		}
		put(it, false)
	}
	if req.CommandID != "" {
		it := commandItem(req, now, commandRetention)
		if err := check("command record", it); err != nil {
			return prepared{}, err
		}
		p.commandIdx = len(items)
		items = append(items, types.TransactWriteItem{Put: &types.Put{
			TableName:                           table,
			Item:                                it,
			ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}})
	}
	if total > MaxTransactionSize {
		return prepared{}, fmt.Errorf("%w: %d bytes in %d items, limit %d", eventstore.ErrTransactionTooLarge, total, len(items), MaxTransactionSize)
	}
	p.input = &dynamodb.TransactWriteItemsInput{TransactItems: items}
	return p, nil
}

// cancelled interprets a cancelled transaction. retry is set for a
// TransactionConflict that left the version as expected.
func (s *Store) cancelled(ctx context.Context, req eventstore.AppendRequest, tx prepared, tce *types.TransactionCanceledException) (res eventstore.AppendResult, retry bool, err error) {
	ref := req.Aggregate
	code := func(i int) string {
		if i < 0 || i >= len(tce.CancellationReasons) {
			return ""
		}
		return aws.ToString(tce.CancellationReasons[i].Code)
	}
	if code(tx.commandIdx) == reasonConditionFailed {
		if old := tce.CancellationReasons[tx.commandIdx].Item; len(old) > 0 {
			res, err := commandOutcome(ref, req.CommandID, old)
			var refused *eventstore.RefusedCommandError
			if err == nil || errors.As(err, &refused) {
				return res, false, err
			}
		}
		res, err := s.CommandResult(ctx, ref, req.CommandID)
		return res, false, err
	}
	for i, gone := range tx.keyGone {
		if code(tx.keyIdx+i) == reasonConditionFailed {
			return eventstore.AppendResult{}, false, gone
		}
	}
	if code(tx.stateIdx) == reasonConditionFailed && code(0) != reasonConditionFailed {
		s.cfg.Logger.DebugContext(ctx, "append conflict: STATE rewritten since read", "aggregate", ref.String(), "version", req.ExpectedVersion)
		return eventstore.AppendResult{}, false, &eventstore.ConcurrencyError{Aggregate: ref, Expected: req.ExpectedVersion, Actual: req.ExpectedVersion, StateRewritten: true}
	}
	conflict := false
	for i := range tce.CancellationReasons {
		switch c := code(i); {
		case c == reasonTransactionConflict:
			conflict = true
		case c == reasonConditionFailed && i > 0 && i != tx.stateIdx && code(0) != reasonConditionFailed:
			return eventstore.AppendResult{}, false, fmt.Errorf("item %d of the transaction already exists although #METADATA allowed the append (inconsistent partition): %w", i, tce)
		}
	}
	if code(0) != reasonConditionFailed && !conflict {
		return eventstore.AppendResult{}, false, tce
	}
	actual, known := int64(0), false
	if code(0) == reasonConditionFailed {
		if old := tce.CancellationReasons[0].Item; len(old) > 0 {
			if v, err := getN(old, AttrCurrentSeq); err == nil {
				actual, known = v, true
			}
		}
	}
	if !known {
		v, err := s.Version(ctx, ref)
		switch {
		case errors.Is(err, eventstore.ErrAggregateNotFound):
			actual = 0
		case err != nil:
			return eventstore.AppendResult{}, false, fmt.Errorf("read version after a cancelled append: %w", err)
		default:
			actual = v
		}
	}
	if req.CommandID != "" && actual != req.ExpectedVersion {
		// The command may have been answered meanwhile (applied by the
		// append that moved the version on, or refused); its record
		// answers for it.
		res, err := s.CommandResult(ctx, ref, req.CommandID)
		var refused *eventstore.RefusedCommandError
		if err == nil || errors.As(err, &refused) {
			return res, false, err
		}
	}
	if actual == req.ExpectedVersion {
		if conflict {
			return eventstore.AppendResult{}, true, tce
		}
		return eventstore.AppendResult{}, false, fmt.Errorf("version condition failed at the expected version %d: %w", actual, tce)
	}
	if actual == 0 {
		return eventstore.AppendResult{}, false, fmt.Errorf("expected version %d: %w", req.ExpectedVersion, eventstore.ErrAggregateNotFound)
	}
	s.cfg.Logger.DebugContext(ctx, "append conflict", "aggregate", ref.String(), "expected", req.ExpectedVersion, "actual", actual)
	return eventstore.AppendResult{}, false, &eventstore.ConcurrencyError{Aggregate: ref, Expected: req.ExpectedVersion, Actual: actual}
}
