package streamsim

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"
)

// TestDescribeStreamPaginatesAndShowsLineage splits shards (one child
// again) and lists them two per page: every shard once, parents before
// children, closed ones with an EndingSequenceNumber, open ones without.
func TestDescribeStreamPaginatesAndShowsLineage(t *testing.T) {
	s := start(t, Config{Shards: 3})
	ctx, c := ctxT(t), s.Client()
	first := s.OpenShards()
	for i := range 30 {
		mustPut(t, s, "k"+strconv.Itoa(i), keyRec("k"+strconv.Itoa(i), i))
	}
	l, r, err := s.Split(first[1])
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Split(first[1]); err == nil {
		t.Fatal("split of a closed shard succeeded")
	}
	mustPut(t, s, "after", keyRec("after", 1))
	ll, lr, err := s.Split(l)
	if err != nil {
		t.Fatal(err)
	}
	shards, pages := describeAll(t, ctx, c, s, 2)
	if len(shards) != 7 || pages != 4 {
		t.Fatalf("%d shards in %d pages, want 7 in 4", len(shards), pages)
	}
	parent := map[string]string{r: first[1], l: first[1], ll: l, lr: l}
	seen := map[string]bool{}
	for _, sh := range shards {
		id := aws.ToString(sh.ShardId)
		if seen[id] {
			t.Fatalf("shard %s listed twice", id)
		}
		seen[id] = true
		if p := aws.ToString(sh.ParentShardId); p != parent[id] {
			t.Errorf("shard %s parent %q, want %q", id, p, parent[id])
		} else if p != "" && !seen[p] {
			t.Errorf("shard %s listed before its parent %s", id, p)
		}
		closed := id == first[1] || id == l
		if end := sh.SequenceNumberRange.EndingSequenceNumber; (end != nil) != closed {
			t.Errorf("shard %s EndingSequenceNumber %v, closed %v", id, aws.ToString(end), closed)
		}
		if aws.ToString(sh.SequenceNumberRange.StartingSequenceNumber) == "" {
			t.Errorf("shard %s has no StartingSequenceNumber", id)
		}
	}
	out, err := c.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(s.StreamARN())})
	if err != nil {
		t.Fatal(err)
	}
	d := out.StreamDescription
	if d.StreamStatus != types.StreamStatusEnabled || d.StreamViewType != types.StreamViewTypeNewAndOldImages ||
		aws.ToString(d.TableName) != DefaultTableName || len(d.KeySchema) != 1 || d.LastEvaluatedShardId != nil || len(d.Shards) != 7 {
		t.Errorf("description %+v", d)
	}
	children, err := c.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(s.StreamARN()),
		ShardFilter: &types.ShardFilter{Type: types.ShardFilterTypeChildShards, ShardId: aws.String(l)}})
	if err != nil || len(children.StreamDescription.Shards) != 2 {
		t.Errorf("CHILD_SHARDS of %s: %v %v", l, children, err)
	}
	_, err = c.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String("arn:nope")})
	wantErr[*types.ResourceNotFoundException](t, err)
	ls, err := c.ListStreams(ctx, &dynamodbstreams.ListStreamsInput{})
	if err != nil || len(ls.Streams) != 1 || aws.ToString(ls.Streams[0].StreamArn) != s.StreamARN() {
		t.Errorf("ListStreams: %+v %v", ls, err)
	}
	if got := s.Stats(); got.Splits != 2 || got.OpenShards != 5 || got.ListedShards != 7 {
		t.Errorf("stats %+v", got)
	}
}

// TestIteratorsOfEveryType reads one shard from TRIM_HORIZON, LATEST,
// AT_ and AFTER_SEQUENCE_NUMBER and AT_TIMESTAMP, and checks the errors
// for an unknown shard and a malformed sequence number.
func TestIteratorsOfEveryType(t *testing.T) {
	clock := newFakeClock()
	s := start(t, Config{Clock: clock.Now, ReadsPerSecondPerShard: -1})
	ctx, c := ctxT(t), s.Client(NoRetries)
	sh := s.OpenShards()[0]
	var put []Stored
	for i := range 10 {
		put = append(put, mustPut(t, s, "k", keyRec("k", i)))
		clock.Add(time.Second)
	}
	all := storedSeqs(put)

	recs, closed := readAll(t, ctx, c, iter(t, ctx, c, s, sh, types.ShardIteratorTypeTrimHorizon, ""), 3)
	if closed || !slices.Equal(seqs(recs), all) {
		t.Fatalf("TRIM_HORIZON read %v (closed %v), want %v", seqs(recs), closed, all)
	}
	latest := iter(t, ctx, c, s, sh, types.ShardIteratorTypeLatest, "")
	if recs, _ := readAll(t, ctx, c, latest, 100); len(recs) != 0 {
		t.Fatalf("LATEST read %d old records", len(recs))
	}
	late := mustPut(t, s, "k", keyRec("k", 10))
	if recs, _ := readAll(t, ctx, c, latest, 100); !slices.Equal(seqs(recs), []string{late.SequenceNumber()}) {
		t.Fatalf("LATEST read %v, want the record put after it", seqs(recs))
	}
	all = append(all, late.SequenceNumber())
	if recs, _ := readAll(t, ctx, c, iter(t, ctx, c, s, sh, types.ShardIteratorTypeAtSequenceNumber, all[3]), 100); !slices.Equal(seqs(recs), all[3:]) {
		t.Fatalf("AT_SEQUENCE_NUMBER read %v, want %v", seqs(recs), all[3:])
	}
	if recs, _ := readAll(t, ctx, c, iter(t, ctx, c, s, sh, types.ShardIteratorTypeAfterSequenceNumber, all[3]), 100); !slices.Equal(seqs(recs), all[4:]) {
		t.Fatalf("AFTER_SEQUENCE_NUMBER read %v, want %v", seqs(recs), all[4:])
	}
	at, err := c.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(s.StreamARN()), ShardId: aws.String(sh),
		ShardIteratorType: types.ShardIteratorTypeAtTimestamp, Timestamp: put[6].Record.Dynamodb.ApproximateCreationDateTime})
	if err != nil {
		t.Fatal(err)
	}
	if recs, _ := readAll(t, ctx, c, at.ShardIterator, 100); !slices.Equal(seqs(recs), all[6:]) {
		t.Fatalf("AT_TIMESTAMP read %v, want %v", seqs(recs), all[6:])
	}
	for i := 1; i < len(all); i++ {
		a, _ := strconv.ParseFloat(all[i-1], 64)
		b, _ := strconv.ParseFloat(all[i], 64)
		if len(all[i]) < 21 || all[i] <= all[i-1] || b < a {
			t.Fatalf("sequence numbers %s, %s do not increase as 21-digit numbers", all[i-1], all[i])
		}
	}

	_, err = c.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(s.StreamARN()), ShardId: aws.String("shardId-nope"), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	wantErr[*types.ResourceNotFoundException](t, err)
	_, err = c.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(s.StreamARN()), ShardId: aws.String(sh),
		ShardIteratorType: types.ShardIteratorTypeAfterSequenceNumber, SequenceNumber: aws.String("12x")})
	if api := wantErr[smithy.APIError](t, err); api.ErrorCode() != "ValidationException" {
		t.Fatalf("malformed sequence number: code %s", api.ErrorCode())
	}
	_, err = c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String("garbage!")})
	if api := wantErr[smithy.APIError](t, err); api.ErrorCode() != "ValidationException" {
		t.Fatalf("malformed iterator: code %s", api.ErrorCode())
	}
}

// TestImagesRoundTripThroughTheSDK puts records with every attribute
// type (and awkward strings) and checks the SDK decodes exactly what was
// put, and the record's other fields as Truth holds them.
func TestImagesRoundTripThroughTheSDK(t *testing.T) {
	s := start(t, Config{})
	ctx, c := ctxT(t), s.Client()
	img := map[string]types.AttributeValue{
		"pk":    &types.AttributeValueMemberS{Value: "agg-1"},
		"s":     &types.AttributeValueMemberS{Value: "quote \" backslash \\ nl \n tab \t ctl \x01 <html>& é 日本 😀"},
		"empty": &types.AttributeValueMemberS{Value: ""},
		"n":     &types.AttributeValueMemberN{Value: "-12.5e3"},
		"b":     &types.AttributeValueMemberB{Value: []byte{0, 1, 2, 255, 254}},
		"t":     &types.AttributeValueMemberBOOL{Value: true},
		"f":     &types.AttributeValueMemberBOOL{Value: false},
		"null":  &types.AttributeValueMemberNULL{Value: true},
		"ss":    &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns":    &types.AttributeValueMemberNS{Value: []string{"1", "2.5"}},
		"bs":    &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2, 3}}},
		"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{
			&types.AttributeValueMemberS{Value: "x"},
			&types.AttributeValueMemberL{Value: []types.AttributeValue{}},
			&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"deep": &types.AttributeValueMemberN{Value: "1"}}},
		}},
		"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"inner": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}},
			"k":     &types.AttributeValueMemberS{Value: "v"},
		}},
	}
	old := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "agg-1"}, "v": &types.AttributeValueMemberN{Value: "1"}}
	ins := mustPut(t, s, "agg-1", Record{NewImage: img})
	mod := mustPut(t, s, "agg-1", Record{NewImage: img, OldImage: old})
	del := mustPut(t, s, "agg-1", Record{OldImage: old})
	if ins.Record.EventName != types.OperationTypeInsert || mod.Record.EventName != types.OperationTypeModify || del.Record.EventName != types.OperationTypeRemove {
		t.Fatalf("event names %s %s %s", ins.Record.EventName, mod.Record.EventName, del.Record.EventName)
	}
	if _, err := s.Put("x", Record{NewImage: map[string]types.AttributeValue{"pk": nil}}); err == nil {
		t.Fatal("Put of a nil attribute value succeeded")
	}
	recs, _ := readAll(t, ctx, c, iter(t, ctx, c, s, ins.ShardID, types.ShardIteratorTypeTrimHorizon, ""), 1000)
	want := []Stored{ins, mod, del}
	if len(recs) != len(want) {
		t.Fatalf("read %d records, want %d", len(recs), len(want))
	}
	for i, got := range recs {
		w := want[i].Record
		if !reflect.DeepEqual(got.Dynamodb.NewImage, w.Dynamodb.NewImage) || !reflect.DeepEqual(got.Dynamodb.OldImage, w.Dynamodb.OldImage) {
			t.Errorf("record %d images:\n got %#v %#v\nwant %#v %#v", i, got.Dynamodb.NewImage, got.Dynamodb.OldImage, w.Dynamodb.NewImage, w.Dynamodb.OldImage)
		}
		if !reflect.DeepEqual(got.Dynamodb.Keys, map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "agg-1"}}) {
			t.Errorf("record %d keys %#v", i, got.Dynamodb.Keys)
		}
		if !got.Dynamodb.ApproximateCreationDateTime.Equal(*w.Dynamodb.ApproximateCreationDateTime) {
			t.Errorf("record %d time %v, want %v", i, got.Dynamodb.ApproximateCreationDateTime, w.Dynamodb.ApproximateCreationDateTime)
		}
		gd, wd := *got.Dynamodb, *w.Dynamodb
		gd.ApproximateCreationDateTime, wd.ApproximateCreationDateTime = nil, nil
		got.Dynamodb, w.Dynamodb = &gd, &wd
		if !reflect.DeepEqual(got, w) {
			t.Errorf("record %d:\n got %#v\nwant %#v", i, got, w)
		}
		if aws.ToString(got.EventSource) != "aws:dynamodb" || aws.ToString(got.AwsRegion) != DefaultRegion || aws.ToString(got.EventID) == "" ||
			aws.ToString(got.EventVersion) == "" || aws.ToInt64(gd.SizeBytes) <= 0 || gd.StreamViewType != types.StreamViewTypeNewAndOldImages {
			t.Errorf("record %d fields %#v %#v", i, got, gd)
		}
	}
}

// TestViewTypeDropsImages: a KEYS_ONLY stream serves keys only.
func TestViewTypeDropsImages(t *testing.T) {
	s := start(t, Config{StreamViewType: types.StreamViewTypeKeysOnly})
	ctx, c := ctxT(t), s.Client()
	st := mustPut(t, s, "k", keyRec("k", 1))
	recs, _ := readAll(t, ctx, c, iter(t, ctx, c, s, st.ShardID, types.ShardIteratorTypeTrimHorizon, ""), 10)
	if len(recs) != 1 || recs[0].Dynamodb.NewImage != nil || recs[0].Dynamodb.OldImage != nil || len(recs[0].Dynamodb.Keys) != 1 ||
		recs[0].Dynamodb.StreamViewType != types.StreamViewTypeKeysOnly {
		t.Fatalf("records %#v", recs)
	}
}

// TestClosedShardEndsWithoutNextIterator: after a split the parent's
// last batch has no NextShardIterator, its LATEST iterator ends at once,
// and the key's later records are in one child.
func TestClosedShardEndsWithoutNextIterator(t *testing.T) {
	s := start(t, Config{})
	ctx, c := ctxT(t), s.Client()
	var before []string
	for i := range 5 {
		before = append(before, mustPut(t, s, "agg", keyRec("agg", i)).SequenceNumber())
	}
	parent := s.OpenShards()[0]
	l, r, err := s.Split(parent)
	if err != nil {
		t.Fatal(err)
	}
	after := mustPut(t, s, "agg", keyRec("agg", 5))
	if after.ShardID != l && after.ShardID != r {
		t.Fatalf("record after the split went to %s, not a child", after.ShardID)
	}
	recs, closed := readAll(t, ctx, c, iter(t, ctx, c, s, parent, types.ShardIteratorTypeTrimHorizon, ""), 2)
	if !closed || !slices.Equal(seqs(recs), before) {
		t.Fatalf("parent read %v closed %v, want %v closed", seqs(recs), closed, before)
	}
	out, err := c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter(t, ctx, c, s, parent, types.ShardIteratorTypeLatest, "")})
	if err != nil || len(out.Records) != 0 || out.NextShardIterator != nil {
		t.Fatalf("LATEST of a closed shard: %+v %v", out, err)
	}
	recs, closed = readAll(t, ctx, c, iter(t, ctx, c, s, after.ShardID, types.ShardIteratorTypeTrimHorizon, ""), 10)
	if closed || !slices.Equal(seqs(recs), []string{after.SequenceNumber()}) {
		t.Fatalf("child read %v closed %v", seqs(recs), closed)
	}
}

// TestThrottlingBeyondReadsPerSecond: with the SDK's retries off the
// sixth GetRecords on one shard within a second is a typed
// LimitExceededException; another shard is unaffected; a second later
// the shard answers again.
func TestThrottlingBeyondReadsPerSecond(t *testing.T) {
	clock := newFakeClock()
	s := start(t, Config{Shards: 2, Clock: clock.Now})
	ctx, c := ctxT(t), s.Client(NoRetries)
	shards := s.OpenShards()
	it := iter(t, ctx, c, s, shards[0], types.ShardIteratorTypeTrimHorizon, "")
	for i := range 5 {
		if _, err := c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it}); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		clock.Add(100 * time.Millisecond)
	}
	_, err := c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
	wantErr[*types.LimitExceededException](t, err)
	if _, err := c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter(t, ctx, c, s, shards[1], types.ShardIteratorTypeTrimHorizon, "")}); err != nil {
		t.Fatalf("other shard: %v", err)
	}
	clock.Add(600 * time.Millisecond) // the first read left the window
	if _, err := c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it}); err != nil {
		t.Fatalf("after the window: %v", err)
	}
	st := s.Stats()
	if st.Throttled != 1 || st.Calls["GetRecords"] != 8 || st.Calls["GetShardIterator"] != 2 {
		t.Fatalf("stats %+v", st)
	}
	if got, want := s.Ceiling(), 2.0*5*1000; got != want {
		t.Fatalf("Ceiling %v, want %v", got, want)
	}
	if _, _, err := s.Split(shards[0]); err != nil {
		t.Fatal(err)
	}
	if got, want := s.Ceiling(), 3.0*5*1000; got != want {
		t.Fatalf("Ceiling after a split %v, want %v", got, want)
	}
}

// TestExpiredIterator: an iterator older than IteratorTTL is a typed
// ExpiredIteratorException; the NextShardIterator of a fresh read is
// valid for a full TTL.
func TestExpiredIterator(t *testing.T) {
	clock := newFakeClock()
	s := start(t, Config{Clock: clock.Now})
	ctx, c := ctxT(t), s.Client(NoRetries)
	sh := s.OpenShards()[0]
	it := iter(t, ctx, c, s, sh, types.ShardIteratorTypeTrimHorizon, "")
	clock.Add(10 * time.Minute)
	out, err := c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
	if err != nil {
		t.Fatal(err)
	}
	clock.Add(10 * time.Minute)
	_, err = c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
	wantErr[*types.ExpiredIteratorException](t, err)
	if _, err := c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: out.NextShardIterator}); err != nil {
		t.Fatalf("NextShardIterator issued 10m ago: %v", err)
	}
}

// TestTrimming: records older than the retention are gone:
// AFTER_SEQUENCE_NUMBER of a trimmed record that is followed by another
// trimmed record, and an iterator into trimmed records, are typed
// TrimmedDataAccessExceptions; TRIM_HORIZON starts at the oldest kept
// record; a closed shard closed longer than the retention disappears.
func TestTrimming(t *testing.T) {
	clock := newFakeClock()
	s := start(t, Config{Clock: clock.Now, Retention: time.Hour, IteratorTTL: 2 * time.Hour, ReadsPerSecondPerShard: -1})
	ctx, c := ctxT(t), s.Client(NoRetries)
	parent := s.OpenShards()[0]
	a1 := mustPut(t, s, "k", keyRec("k", 1))
	a2 := mustPut(t, s, "k", keyRec("k", 2))
	early := iter(t, ctx, c, s, parent, types.ShardIteratorTypeTrimHorizon, "")
	clock.Add(40 * time.Minute)
	b1 := mustPut(t, s, "k", keyRec("k", 3))
	child, _, err := s.Split(parent)
	if err != nil {
		t.Fatal(err)
	}
	clock.Add(30 * time.Minute) // a1, a2 are 70m old; b1 40m old
	_, err = c.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(s.StreamARN()), ShardId: aws.String(parent),
		ShardIteratorType: types.ShardIteratorTypeAfterSequenceNumber, SequenceNumber: aws.String(a1.SequenceNumber())})
	wantErr[*types.TrimmedDataAccessException](t, err)
	_, err = c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: early})
	wantErr[*types.TrimmedDataAccessException](t, err)
	// After the last trimmed record nothing is lost: allowed.
	if recs, closed := readAll(t, ctx, c, iter(t, ctx, c, s, parent, types.ShardIteratorTypeAfterSequenceNumber, a2.SequenceNumber()), 10); !closed || !slices.Equal(seqs(recs), []string{b1.SequenceNumber()}) {
		t.Fatalf("after the last trimmed record: %v closed %v", seqs(recs), closed)
	}
	if recs, _ := readAll(t, ctx, c, iter(t, ctx, c, s, parent, types.ShardIteratorTypeTrimHorizon, ""), 10); !slices.Equal(seqs(recs), []string{b1.SequenceNumber()}) {
		t.Fatalf("TRIM_HORIZON read %v, want only %s", seqs(recs), b1.SequenceNumber())
	}
	clock.Add(31 * time.Minute) // the parent closed 61m ago
	shards, _ := describeAll(t, ctx, c, s, 100)
	for _, sh := range shards {
		if aws.ToString(sh.ShardId) == parent {
			t.Fatalf("trimmed shard %s still listed", parent)
		}
	}
	if len(shards) != 2 || aws.ToString(shards[0].ParentShardId) != parent {
		t.Fatalf("listed %+v, want the two children (naming their vanished parent)", shards)
	}
	_, err = c.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(s.StreamARN()), ShardId: aws.String(parent), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	wantErr[*types.ResourceNotFoundException](t, err)
	if _, err := c.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(s.StreamARN()), ShardId: aws.String(child), ShardIteratorType: types.ShardIteratorTypeTrimHorizon}); err != nil {
		t.Fatal(err)
	}
	truth := s.Truth()
	if len(truth) != 3 || !truth[0].Trimmed || truth[1].Trimmed || len(truth[0].Records) != 3 {
		t.Fatalf("truth %+v", truth)
	}
}

// TestWireErrorShape checks the raw answers: status 400, AWS JSON 1.0
// content type, __type with DynamoDB's namespace.
func TestWireErrorShape(t *testing.T) {
	s := start(t, Config{})
	post := func(target, body string) (int, http.Header, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/", strings.NewReader(body))
		req.Header.Set("X-Amz-Target", target)
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&m); err != nil {
			t.Fatalf("answer %q: %v", raw, err)
		}
		return resp.StatusCode, resp.Header, m
	}
	code, h, m := post("DynamoDBStreams_20120810.GetShardIterator", `{"StreamArn":"`+s.StreamARN()+`","ShardId":"nope","ShardIteratorType":"LATEST"}`)
	if code != 400 || h.Get("Content-Type") != "application/x-amz-json-1.0" || m["__type"] != "com.amazonaws.dynamodb.v20120810#ResourceNotFoundException" || m["message"] == "" {
		t.Fatalf("%d %v %v", code, h, m)
	}
	if code, _, m := post("DynamoDBStreams_20120810.Nope", `{}`); code != 400 || !strings.HasSuffix(m["__type"].(string), "#UnknownOperationException") {
		t.Fatalf("unknown op: %d %v", code, m)
	}
	if code, _, m := post("DynamoDBStreams_20120810.DescribeStream", `{"StreamArn":`); code != 400 || !strings.HasSuffix(m["__type"].(string), "#SerializationException") {
		t.Fatalf("bad JSON: %d %v", code, m)
	}
}

// TestCallLatencyAndClose: every call takes at least CallLatency; Close
// ends SplitEvery and later Puts fail.
func TestCallLatencyAndClose(t *testing.T) {
	s, err := Start(Config{CallLatency: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, c := ctxT(t), s.Client()
	t0 := time.Now()
	if _, err := c.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(s.StreamARN())}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d < 30*time.Millisecond {
		t.Fatalf("call took %v, want >= 30ms", d)
	}
	done := s.SplitEvery(ctx, time.Hour, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	default:
		t.Fatal("SplitEvery still running after Close")
	}
	if _, err := s.Put("k", keyRec("k", 1)); err == nil {
		t.Fatal("Put after Close succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, err := Start(Config{Shards: -1}); err == nil {
		t.Fatal("Shards -1 accepted")
	}
	if got := (Config{ReadsPerSecondPerShard: -1}); math.IsInf(mustNew(t, got).Ceiling(), 1) == false {
		t.Fatal("unlimited reads have a finite ceiling")
	}
}

func mustNew(t *testing.T, cfg Config) *Sim {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
