package dynamodb_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
)

// BenchmarkAppendVsRawTransactWrite measures Store.Append (Prepare +
// validation + size checks + the transaction) against a hand-built
// TransactWriteItems with the same three items (conditional #METADATA
// update, conditional EVENT put, conditional COMMAND put) at the same
// concurrency, alternating the two in rounds within one run. Each
// goroutine owns one aggregate. It reports throughput and p50/p99 latency
// of both and their ratios (store/raw; throughput_ratio ≥ 0.9 is the
// project's target). b.N appends are made on each side. Nothing is
// asserted about time. Run e.g.
//
//	go test -run '^$' -bench AppendVsRaw -benchtime 300x ./eventstore/dynamodb/
func BenchmarkAppendVsRawTransactWrite(b *testing.B) {
	client, table := newTable(b)
	s, err := store.New(store.Config{Client: client, Table: table})
	if err != nil {
		b.Fatal(err)
	}
	for _, aggregates := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("aggregates=%d", aggregates), func(b *testing.B) {
			ctx := context.Background()
			run := fmt.Sprintf("%d-%d", aggregates, time.Now().UnixNano())
			storeSide := &sideStats{}
			rawSide := &sideStats{}
			storeVersions := make([]int64, aggregates)
			rawVersions := make([]int64, aggregates)
			const rounds = 4
			per := max(1, (b.N+rounds-1)/rounds)
			b.ResetTimer()
			for round := range rounds {
				n := min(per, b.N-round*per)
				if n <= 0 {
					break
				}
				rawSide.run(b, aggregates, n, func(g int) error {
					return rawAppend(ctx, client, table, eventstore.Ref{Type: "bench", ID: "raw-" + run + "-" + strconv.Itoa(g)}, &rawVersions[g])
				})
				storeSide.run(b, aggregates, n, func(g int) error {
					return storeAppend(ctx, s, eventstore.Ref{Type: "bench", ID: "store-" + run + "-" + strconv.Itoa(g)}, &storeVersions[g])
				})
			}
			b.StopTimer()
			sp50, sp99 := storeSide.percentiles()
			rp50, rp99 := rawSide.percentiles()
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(storeSide.rate(), "appends/s")
			b.ReportMetric(rawSide.rate(), "raw_appends/s")
			b.ReportMetric(storeSide.rate()/rawSide.rate(), "throughput_ratio")
			b.ReportMetric(ms(sp50), "p50_ms")
			b.ReportMetric(ms(sp99), "p99_ms")
			b.ReportMetric(ms(rp50), "raw_p50_ms")
			b.ReportMetric(ms(rp99), "raw_p99_ms")
			b.ReportMetric(float64(sp50)/float64(rp50), "p50_ratio")
			b.ReportMetric(float64(sp99)/float64(rp99), "p99_ratio")
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

type sideStats struct {
	mu        sync.Mutex
	latencies []time.Duration
	elapsed   time.Duration
}

// run makes n appends with `aggregates` goroutines (goroutine g always
// appends to its own aggregate) and records each latency and the wall time.
func (s *sideStats) run(b *testing.B, aggregates, n int, appendOne func(g int) error) {
	start := time.Now()
	var wg sync.WaitGroup
	for g := range aggregates {
		count := n / aggregates
		if g < n%aggregates {
			count++
		}
		wg.Go(func() {
			local := make([]time.Duration, 0, count)
			for range count {
				t0 := time.Now()
				if err := appendOne(g); err != nil {
					b.Error(err)
					return
				}
				local = append(local, time.Since(t0))
			}
			s.mu.Lock()
			s.latencies = append(s.latencies, local...)
			s.mu.Unlock()
		})
	}
	wg.Wait()
	s.elapsed += time.Since(start)
}

func (s *sideStats) rate() float64 { return float64(len(s.latencies)) / s.elapsed.Seconds() }

func (s *sideStats) percentiles() (p50, p99 time.Duration) {
	l := slices.Clone(s.latencies)
	if len(l) == 0 {
		return 0, 0
	}
	slices.Sort(l)
	at := func(q float64) time.Duration { return l[min(len(l)-1, int(q*float64(len(l))))] }
	return at(0.50), at(0.99)
}

var benchMeta = eventstore.Metadata{CorrelationID: "corr-bench", Actor: "bench", IP: "127.0.0.1"}

func storeAppend(ctx context.Context, s *store.Store, ref eventstore.Ref, version *int64) error {
	req, err := eventstore.Prepare(ref, *version, eventstore.Change{
		CommandID: ulid.Make().String(), Metadata: benchMeta,
		Events: []eventstore.NewEvent{eventstore.Event("Deposited", map[string]any{"amount": 25, "desc": "bench"})},
	}, s.Schema())
	if err != nil {
		return err
	}
	res, err := s.Append(ctx, req)
	if err != nil {
		return err
	}
	*version = res.LastSeq
	return nil
}

// rawAppend writes the same three items as storeAppend with one
// hand-built TransactWriteItems call.
func rawAppend(ctx context.Context, client *ddb.Client, table string, ref eventstore.Ref, version *int64) error {
	S := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	N := func(v int64) types.AttributeValue {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
	}
	now := time.Now().UTC()
	id, cmd := ulid.Make().String(), ulid.Make().String()
	pk := "AGGREGATE#" + ref.Type + "#" + ref.ID
	next := *version + 1
	cond, vals := "attribute_not_exists(pk)", map[string]types.AttributeValue{":new": N(next), ":now": S(now.Format(time.RFC3339Nano)), ":t": S(ref.Type), ":id": S(ref.ID)}
	if *version > 0 {
		cond = "currentSeq = :expected"
		vals[":expected"] = N(*version)
	}
	tbl := aws.String(table)
	_, err := client.TransactWriteItems(ctx, &ddb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{TableName: tbl, Key: map[string]types.AttributeValue{"pk": S(pk), "sk": S("#METADATA")},
			UpdateExpression:    aws.String("SET currentSeq = :new, updatedAt = :now, aggregateType = :t, aggregateId = :id"),
			ConditionExpression: aws.String(cond), ExpressionAttributeValues: vals}},
		{Put: &types.Put{TableName: tbl, ConditionExpression: aws.String("attribute_not_exists(pk)"), Item: map[string]types.AttributeValue{
			"pk": S(pk), "sk": S(fmt.Sprintf("EVENT#%012d", next)), "gsi1pk": S("EVENT_TYPE#Deposited"), "gsi1sk": S("EVENT#" + id),
			"eventId": S(id), "aggregateType": S(ref.Type), "aggregateId": S(ref.ID), "seq": N(next), "eventType": S("Deposited"),
			"schemaVersion": N(1), "occurredAt": S(now.Format(time.RFC3339Nano)), "payload": S(`{"amount":25,"desc":"bench"}`),
			"correlationId": S(benchMeta.CorrelationID), "causationId": S(cmd), "actor": S(benchMeta.Actor), "ip": S(benchMeta.IP),
		}}},
		{Put: &types.Put{TableName: tbl, ConditionExpression: aws.String("attribute_not_exists(pk)"), Item: map[string]types.AttributeValue{
			"pk": S(pk), "sk": S("COMMAND#" + cmd), "commandId": S(cmd), "firstSeq": N(next), "lastSeq": N(next),
			"eventIds": &types.AttributeValueMemberL{Value: []types.AttributeValue{S(id)}}, "updatedAt": S(now.Format(time.RFC3339Nano)),
		}}},
	}})
	if err != nil {
		return err
	}
	*version = next
	return nil
}
