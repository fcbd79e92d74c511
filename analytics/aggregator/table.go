package aggregator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/eventpipe/eventpipe/internal/pause"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/internal/ddbattr"
	"github.com/eventpipe/eventpipe/rollup"
)

type item = map[string]types.AttributeValue

// errConflict is a conditional write that found the item changed since
// it was read: another writer (a consumer that lost the partition and
// has not noticed yet) got there first.
var errConflict = errors.New("aggregator: item changed since it was read")

// table reads and writes the analytics table's session and aggregation
// items.
type table struct {
	client     API
	name       string
	sessionTTL time.Duration
}

// getAll reads keys with BatchGetItem (consistent reads, 100 keys per
// call, unprocessed keys read again), returning the items found by
// "pk\x00sk".
func (t *table) getAll(ctx context.Context, keys []analytics.Key, projection string, names map[string]string) (map[string]item, error) {
	out := make(map[string]item, len(keys))
	for start := 0; start < len(keys); start += 100 {
		var req []item
		for _, k := range keys[start:min(start+100, len(keys))] {
			req = append(req, k.Attributes())
		}
		ka := types.KeysAndAttributes{Keys: req, ConsistentRead: aws.Bool(true)}
		if projection != "" {
			ka.ProjectionExpression, ka.ExpressionAttributeNames = aws.String(projection), names
		}
		pending := map[string]types.KeysAndAttributes{t.name: ka}
		for attempt := 0; len(pending) > 0; attempt++ {
			if attempt > 0 {
				if err := pause.Sleep(ctx, backoff(attempt)); err != nil {
					return nil, err
				}
			}
			res, err := t.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: pending})
			if err != nil {
				return nil, fmt.Errorf("read %d items of %s: %w", len(req), t.name, err)
			}
			for _, it := range res.Responses[t.name] {
				out[keyOf(it)] = it
			}
			pending = res.UnprocessedKeys
		}
	}
	return out, nil
}

func keyOf(it item) string { return str(it, analytics.AttrPK) + "\x00" + str(it, analytics.AttrSK) }

func keyString(k analytics.Key) string { return k.PK + "\x00" + k.SK }

func str(it item, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func num(it item, name string) (int64, bool, error) {
	a, ok := it[name]
	if !ok {
		return 0, false, nil
	}
	v, ok := a.(*types.AttributeValueMemberN)
	if !ok {
		return 0, false, fmt.Errorf("attribute %s is %T, want a number", name, a)
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("attribute %s %q is not an integer", name, v.Value)
	}
	return n, true, nil
}

func bin(it item, name string) []byte {
	if v, ok := it[name].(*types.AttributeValueMemberB); ok {
		return v.Value
	}
	return nil
}

// readSessions reads the sessions of ids; a missing one is a new
// session.
func (t *table) readSessions(ctx context.Context, source string, ids []string) (map[string]*session, error) {
	keys := make([]analytics.Key, len(ids))
	for i, id := range ids {
		keys[i] = analytics.SessionKey(source, id)
	}
	items, err := t.getAll(ctx, keys, "", nil)
	if err != nil {
		return nil, fmt.Errorf("read sessions: %w", err)
	}
	out := make(map[string]*session, len(ids))
	for i, id := range ids {
		s, err := decodeSession(items[keyString(keys[i])])
		if err != nil {
			return nil, fmt.Errorf("read session %s/%s: %w", source, id, err)
		}
		out[id] = s
	}
	return out, nil
}

// readSession reads one session again, after a conflict.
func (t *table) readSession(ctx context.Context, source, id string) (*session, error) {
	res, err := t.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(t.name), Key: analytics.SessionKey(source, id).Attributes(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("read session %s/%s: %w", source, id, err)
	}
	s, err := decodeSession(res.Item)
	if err != nil {
		return nil, fmt.Errorf("read session %s/%s: %w", source, id, err)
	}
	return s, nil
}

func decodeSession(it item) (*session, error) {
	s := &session{}
	if it == nil {
		return s, nil
	}
	s.stored = true
	var err error
	nums := []struct {
		name string
		v    *int64
	}{{analytics.AttrVersion, &s.version}, {analytics.AttrEventCount, &s.count}}
	for _, n := range nums {
		if *n.v, _, err = num(it, n.name); err != nil {
			return nil, err
		}
	}
	ids := []struct {
		name string
		v    *ulid.ULID
	}{{analytics.AttrFirstEventID, &s.first}, {analytics.AttrLastEventID, &s.last}, {analytics.AttrEntryEventID, &s.entry}, {analytics.AttrExitEventID, &s.exit}}
	for _, f := range ids {
		if v := str(it, f.name); v != "" {
			if *f.v, err = ulid.ParseStrict(v); err != nil {
				return nil, fmt.Errorf("attribute %s: %w", f.name, err)
			}
		}
	}
	for _, f := range []struct {
		name string
		v    *time.Time
	}{{analytics.AttrFirstSeenAt, &s.firstAt}, {analytics.AttrLastSeenAt, &s.lastAt}} {
		if *f.v, err = time.Parse(time.RFC3339Nano, str(it, f.name)); err != nil {
			return nil, fmt.Errorf("attribute %s: %w", f.name, err)
		}
	}
	s.userID, s.entryURL, s.exitURL = str(it, analytics.AttrUserID), str(it, analytics.AttrEntryURL), str(it, analytics.AttrExitURL)
	raw := bin(it, analytics.AttrRecentIDs)
	if len(raw)%16 != 0 {
		return nil, fmt.Errorf("attribute %s has %d bytes, not a multiple of 16", analytics.AttrRecentIDs, len(raw))
	}
	for i := 0; i < len(raw); i += 16 {
		var id ulid.ULID
		copy(id[:], raw[i:i+16])
		s.recent = append(s.recent, id)
	}
	return s, nil
}

// putSession writes s as the session item, if the stored item is still
// at s.version (or absent when s is new); else errConflict.
func (t *table) putSession(ctx context.Context, source, id string, s *session) error {
	k := analytics.SessionKey(source, id)
	it := item{
		analytics.AttrPK: ddbattr.S(k.PK), analytics.AttrSK: ddbattr.S(k.SK),
		analytics.AttrEventCount:   ddbattr.N(s.count),
		analytics.AttrFirstSeenAt:  ddbattr.S(s.firstAt.UTC().Format(time.RFC3339Nano)),
		analytics.AttrLastSeenAt:   ddbattr.S(s.lastAt.UTC().Format(time.RFC3339Nano)),
		analytics.AttrDuration:     ddbattr.N(s.duration()),
		analytics.AttrTTL:          ddbattr.N(s.lastAt.Add(t.sessionTTL).Unix()),
		analytics.AttrFirstEventID: ddbattr.S(s.first.String()),
		analytics.AttrLastEventID:  ddbattr.S(s.last.String()),
		analytics.AttrVersion:      ddbattr.N(s.version + 1),
	}
	if s.userID != "" {
		it[analytics.AttrUserID] = ddbattr.S(s.userID)
		it[analytics.AttrGSI1PK] = ddbattr.S(analytics.UserKey(s.userID))
		it[analytics.AttrGSI1SK] = ddbattr.S(k.SK)
	}
	if s.entryURL != "" {
		it[analytics.AttrEntryURL], it[analytics.AttrEntryEventID] = ddbattr.S(s.entryURL), ddbattr.S(s.entry.String())
		it[analytics.AttrExitURL], it[analytics.AttrExitEventID] = ddbattr.S(s.exitURL), ddbattr.S(s.exit.String())
	}
	recent := make([]byte, 0, 16*len(s.recent))
	for _, r := range s.recent {
		recent = append(recent, r[:]...)
	}
	it[analytics.AttrRecentIDs] = &types.AttributeValueMemberB{Value: recent}
	in := &dynamodb.PutItemInput{TableName: aws.String(t.name), Item: it}
	if s.stored {
		in.ConditionExpression = aws.String("#v = :v")
		in.ExpressionAttributeNames = map[string]string{"#v": analytics.AttrVersion}
		in.ExpressionAttributeValues = item{":v": ddbattr.N(s.version)}
	} else {
		in.ConditionExpression = aws.String("attribute_not_exists(#pk)")
		in.ExpressionAttributeNames = map[string]string{"#pk": analytics.AttrPK}
	}
	if _, err := t.client.PutItem(ctx, in); err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return errConflict
		}
		return fmt.Errorf("write session %s/%s: %w", source, id, err)
	}
	return nil
}

// bucketState is what an aggregation item holds for one partition: the
// highest offset applied and the sketch of users seen there.
type bucketState struct {
	watermark int64
	marked    bool // the item has a watermark for the partition
	users     []byte
}

func partitionAttrs(partition int32) (wm, users string) {
	p := strconv.Itoa(int(partition))
	return analytics.AttrWatermarkPrefix + p, analytics.AttrUsersPrefix + p
}

func aggregationKey(b rollup.Bucket) analytics.Key {
	return analytics.AggregationKey(b.Series, b.Period, b.Name)
}

// readBuckets reads the partition's watermark and sketch of each bucket.
func (t *table) readBuckets(ctx context.Context, partition int32, buckets []rollup.Bucket) (map[rollup.Bucket]bucketState, error) {
	wm, users := partitionAttrs(partition)
	keys := make([]analytics.Key, len(buckets))
	for i, b := range buckets {
		keys[i] = aggregationKey(b)
	}
	items, err := t.getAll(ctx, keys, "#pk, #sk, #wm, #u", map[string]string{"#pk": analytics.AttrPK, "#sk": analytics.AttrSK, "#wm": wm, "#u": users})
	if err != nil {
		return nil, fmt.Errorf("read aggregations: %w", err)
	}
	out := make(map[rollup.Bucket]bucketState, len(buckets))
	for i, b := range buckets {
		st, err := decodeBucket(items[keyString(keys[i])], partition)
		if err != nil {
			return nil, fmt.Errorf("read aggregation %s/%s: %w", keys[i].PK, keys[i].SK, err)
		}
		out[b] = st
	}
	return out, nil
}

func (t *table) readBucket(ctx context.Context, partition int32, b rollup.Bucket) (bucketState, error) {
	k := aggregationKey(b)
	res, err := t.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(t.name), Key: k.Attributes(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return bucketState{}, fmt.Errorf("read aggregation %s/%s: %w", k.PK, k.SK, err)
	}
	st, err := decodeBucket(res.Item, partition)
	if err != nil {
		return bucketState{}, fmt.Errorf("read aggregation %s/%s: %w", k.PK, k.SK, err)
	}
	return st, nil
}

func decodeBucket(it item, partition int32) (bucketState, error) {
	wm, users := partitionAttrs(partition)
	var st bucketState
	var err error
	if st.watermark, st.marked, err = num(it, wm); err != nil {
		return bucketState{}, err
	}
	st.users = bin(it, users)
	return st, nil
}

// writeBucket adds m to the bucket's counters, stores users as the
// partition's sketch and moves the partition's watermark to offset, if
// the watermark is still what was read (st); else errConflict.
func (t *table) writeBucket(ctx context.Context, partition int32, b rollup.Bucket, st bucketState, m rollup.Measures, users []byte, offset int64) error {
	wm, usersAttr := partitionAttrs(partition)
	names := map[string]string{"#wm": wm}
	values := item{":wm": ddbattr.N(offset)}
	set := "SET #wm = :wm"
	if users != nil {
		names["#u"] = usersAttr
		values[":u"] = &types.AttributeValueMemberB{Value: users}
		set += ", #u = :u"
	}
	measures := make([]string, 0, len(m))
	for name, v := range m {
		if v != 0 {
			measures = append(measures, name)
		}
	}
	sort.Strings(measures)
	add := ""
	for i, name := range measures {
		n, v := "#m"+strconv.Itoa(i), ":m"+strconv.Itoa(i)
		names[n], values[v] = name, ddbattr.N(m[name])
		if add == "" {
			add = " ADD "
		} else {
			add += ", "
		}
		add += n + " " + v
	}
	cond := "attribute_not_exists(#wm)"
	if st.marked {
		cond = "#wm = :read"
		values[":read"] = ddbattr.N(st.watermark)
	}
	return t.updateAggregation(ctx, b, set+add, cond, names, values)
}

// updateAggregation applies update to b's aggregation item under cond;
// a failed condition is errConflict.
func (t *table) updateAggregation(ctx context.Context, b rollup.Bucket, update, cond string, names map[string]string, values map[string]types.AttributeValue) error {
	k := aggregationKey(b)
	_, err := t.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.name),
		Key:                       k.Attributes(),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return errConflict
		}
		return fmt.Errorf("write aggregation %s/%s: %w", k.PK, k.SK, err)
	}
	return nil
}

// backoff is the pause before retry attempt (1, 2, …): 25 ms doubled
// up to 2 s.
func backoff(attempt int) time.Duration {
	return pause.Backoff(attempt, 25*time.Millisecond, 2*time.Second)
}
