package dynamodb_test

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
)

var (
	listingSizes  = flag.String("listing.sizes", "1000,10000", "BenchmarkRecalculateListingVsScan: aggregates of the listed type, one sub-benchmark each (e.g. 10000,100000)")
	listingOthers = flag.Int("listing.others", 10, "BenchmarkRecalculateListingVsScan: aggregates of other types in the table per aggregate of the listed type")
)

// BenchmarkRecalculateListingVsScan measures what `recalculate --all`
// reads to find its aggregates, on a table holding -listing.others (10)
// times more aggregates of other types than of the listed one, for each
// size in -listing.sizes (default 1000 and 10000 aggregates; run e.g.
// -listing.sizes 10000,100000 for the larger table, which takes a while to
// seed on DynamoDB Local). One sub-benchmark per size grows the same
// table (#METADATA items only, batch-written, with the index keys an
// append writes) and makes one pass each way, whatever b.N:
//
//   - the listing: Store.ListAggregates a page of 100 at a time, each page
//     handed on and dropped, as Recalculate does;
//   - the baseline, measured in the same run: the scan the listing
//     replaced (every item of the table read, the type's ids kept, then
//     sorted), as Store.AggregateIDs did.
//
// It reports the items each read per aggregate of the type (DynamoDB's
// ScannedCount; the baseline's is a floor, as a real table has several
// items per aggregate), their ratio, and the peak Go heap in use above
// the heap before the pass (sampled every millisecond, with GOGC 5 so
// that it tracks what a pass keeps) per aggregate and in all: the
// listing's stays flat as the table grows, the baseline's grows with it.
// Nothing about time is asserted.
//
//	go test -run '^$' -bench RecalculateListingVsScan -benchtime 1x ./eventstore/dynamodb/
func BenchmarkRecalculateListingVsScan(b *testing.B) {
	var sizes []int
	for _, f := range strings.Split(*listingSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("-listing.sizes: %q is not a positive number", f)
		}
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	raw, table := newTable(b)
	// The listing reads only the table and its index: without the stream
	// DynamoDB Local seeds a large table at a steady rate (with it, each
	// write also adds a stream record, and seeding 100,000 aggregates
	// slowed from ~500 to ~40 items a second).
	if _, err := raw.UpdateTable(context.Background(), &ddb.UpdateTableInput{TableName: aws.String(table),
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(false)}}); err != nil {
		b.Fatalf("turn the stream off: %v", err)
	}
	client := &readCounter{Client: raw}
	s, err := store.New(store.Config{Client: client, Table: table})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	const listed = "listed"
	var seeded, seededOthers int
	for _, n := range sizes {
		b.Run(fmt.Sprintf("aggregates=%d", n), func(b *testing.B) {
			start := time.Now()
			seedMetadata(b, raw, table, listed, seeded, n)
			seedMetadata(b, raw, table, "other", seededOthers, n**listingOthers)
			seeded, seededOthers = n, n**listingOthers
			b.Logf("table holds %d aggregates of %s and %d of other types (seeded in %v)", n, listed, n**listingOthers, time.Since(start).Round(time.Second))
			b.ResetTimer()

			listRead, listPeak := measure(client, func() int {
				count := 0
				for q := (eventstore.AggregateQuery{Type: listed, Limit: 100}); ; {
					page, err := s.ListAggregates(ctx, q)
					if err != nil {
						b.Fatal(err)
					}
					count += len(page.IDs)
					if !page.More || len(page.IDs) == 0 {
						return count
					}
					q.After = page.IDs[len(page.IDs)-1]
				}
			}, b, n)
			scanRead, scanPeak := measure(client, func() int {
				return len(scanIDs(ctx, b, client, table, listed))
			}, b, n)

			b.StopTimer()
			per := float64(n)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(listRead)/per, "items_read/aggregate")
			b.ReportMetric(float64(scanRead)/per, "scan_items_read/aggregate")
			b.ReportMetric(float64(listRead)/float64(scanRead), "read_ratio")
			b.ReportMetric(float64(listPeak)/per, "peak_heap_B/aggregate")
			b.ReportMetric(float64(scanPeak)/per, "scan_peak_heap_B/aggregate")
			b.ReportMetric(float64(listPeak)/(1<<10), "peak_heap_KiB")
			b.ReportMetric(float64(scanPeak)/(1<<10), "scan_peak_heap_KiB")
		})
	}
}

// measure runs pass, which must find n aggregates, and returns the items
// it read and the peak heap in use above the heap before it.
func measure(c *readCounter, pass func() int, b *testing.B, n int) (read int64, peak uint64) {
	b.Helper()
	// Collect garbage promptly, so that the heap in use tracks what the
	// pass keeps rather than what it dropped.
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var top atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > base && ms.HeapInuse-base > top.Load() {
				top.Store(ms.HeapInuse - base)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	before := c.read.Load()
	found := pass()
	close(stop)
	wg.Wait()
	if found != n {
		b.Fatalf("a pass found %d aggregates, want %d", found, n)
	}
	return c.read.Load() - before, top.Load()
}

// scanIDs is the listing the index replaced: a scan of the whole table
// for the #METADATA items of aggregateType, every id kept, sorted.
func scanIDs(ctx context.Context, b *testing.B, c *readCounter, table, aggregateType string) []string {
	b.Helper()
	var ids []string
	p := ddb.NewScanPaginator(c, &ddb.ScanInput{
		TableName:                 aws.String(table),
		FilterExpression:          aws.String("#sk = :meta AND #t = :t"),
		ProjectionExpression:      aws.String("#id"),
		ExpressionAttributeNames:  map[string]string{"#sk": store.AttrSK, "#t": store.AttrAggregateType, "#id": store.AttrAggregateID},
		ExpressionAttributeValues: map[string]types.AttributeValue{":meta": &types.AttributeValueMemberS{Value: store.SKMetadata}, ":t": &types.AttributeValueMemberS{Value: aggregateType}},
	})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, it := range out.Items {
			if v, ok := it[store.AttrAggregateID].(*types.AttributeValueMemberS); ok {
				ids = append(ids, v.Value)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// readCounter is the DynamoDB client, counting the items its queries and
// scans read (ScannedCount).
type readCounter struct {
	*ddb.Client
	read atomic.Int64
}

func (c *readCounter) Query(ctx context.Context, in *ddb.QueryInput, opts ...func(*ddb.Options)) (*ddb.QueryOutput, error) {
	out, err := c.Client.Query(ctx, in, opts...)
	if err == nil {
		c.read.Add(int64(out.ScannedCount))
	}
	return out, err
}

func (c *readCounter) Scan(ctx context.Context, in *ddb.ScanInput, opts ...func(*ddb.Options)) (*ddb.ScanOutput, error) {
	out, err := c.Client.Scan(ctx, in, opts...)
	if err == nil {
		c.read.Add(int64(out.ScannedCount))
	}
	return out, err
}

// seedMetadata batch-writes the #METADATA items of aggregates from..to-1
// of aggregateType (ids zero-padded, so that they sort as numbers), as an
// append writes them, from 8 goroutines of 25-item batches.
func seedMetadata(b *testing.B, client *ddb.Client, table, aggregateType string, from, to int) {
	b.Helper()
	ctx := context.Background()
	batches := make(chan []types.WriteRequest)
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 8 {
		wg.Go(func() {
			for batch := range batches { // drained to the end, failed or not
				req := map[string][]types.WriteRequest{table: batch}
				for attempt := 0; len(req) > 0 && failed.Load() == nil; attempt++ {
					out, err := client.BatchWriteItem(ctx, &ddb.BatchWriteItemInput{RequestItems: req})
					switch {
					case err != nil && attempt < 5:
						time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
					case err != nil:
						failed.CompareAndSwap(nil, err)
					default:
						req = out.UnprocessedItems
					}
				}
			}
		})
	}
	S := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	now := time.Now().UTC().Format(time.RFC3339Nano)
	var batch []types.WriteRequest
	for i := from; i < to; i++ {
		ref := eventstore.Ref{Type: aggregateType, ID: fmt.Sprintf("%09d", i)}
		batch = append(batch, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
			store.AttrPK: S(store.PartitionKey(ref)), store.AttrSK: S(store.SKMetadata),
			store.AttrCurrentSeq: &types.AttributeValueMemberN{Value: "1"}, store.AttrUpdatedAt: S(now),
			store.AttrAggregateType: S(ref.Type), store.AttrAggregateID: S(ref.ID),
			store.AttrGSI1PK: S(store.AggregateTypeKey(ref.Type)), store.AttrGSI1SK: S(ref.ID),
		}}})
		if len(batch) == 25 || i == to-1 {
			batches <- batch
			batch = nil
		}
	}
	close(batches)
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatalf("seed %s: %v", aggregateType, err)
	}
}
