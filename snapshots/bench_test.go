package snapshots_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/eventpipe/eventpipe/domains/bankaccount"
	ddbstore "github.com/eventpipe/eventpipe/eventstore/dynamodb"
)

// withoutEvery is how many loads with the snapshot are timed per load
// without: a load without replays all 10,000 events and takes about as
// long as a hundred loads with, so timing one per withoutEvery keeps
// `make bench` (300 iterations) short while both means stay measured in
// the same run, interleaved.
const withoutEvery = 10

// shared is the 10,000-event account every run of the benchmark loads:
// go test calls a benchmark function more than once (b.N = 1 first, then
// the real N), and the log takes minutes to build on DynamoDB Local, so it
// is built once per process; TestMain deletes its table.
var shared struct {
	once   sync.Once
	store  *ddbstore.Store
	client *dynamodb.Client
	id     string
}

func sharedLongAccount(b *testing.B) (*ddbstore.Store, string) {
	b.Helper()
	shared.once.Do(func() {
		store, client := newStreamlessStore(b)
		shared.client = client // deleted by TestMain, even if the build fails
		shared.store = store
		shared.id = longAccount(b, store)
	})
	if shared.id == "" {
		b.Fatal("the shared 10,000-event account could not be built (see the first run)")
	}
	return shared.store, shared.id
}

// BenchmarkLoadWithSnapshotVsWithout loads a 10,000-event bank account
// (snapshot at 9,900) through Facet.Load: from its snapshot plus the 100
// later events, and from nothing by replaying all 10,000 events (the same
// table seen without snapshots). It reports both mean times per load and
// with/without as with_snapshot/without_ratio (lower is better: the
// fraction of the replay a snapshot leaves). Nothing about time is
// asserted.
func BenchmarkLoadWithSnapshotVsWithout(b *testing.B) {
	ctx := context.Background()
	store, id := sharedLongAccount(b)
	with, err := bankaccount.NewFacet(store, nil)
	if err != nil {
		b.Fatal(err)
	}
	without, err := bankaccount.NewFacet(withoutSnapshots{store}, nil)
	if err != nil {
		b.Fatal(err)
	}
	var tookWith, tookWithout time.Duration
	var nWith, nWithout int
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		st, err := with.Load(ctx, id)
		if err != nil || st.Seq != 10_000 {
			b.Fatalf("load with snapshot: %d, %v", st.Seq, err)
		}
		tookWith += time.Since(start)
		nWith++
		if i%withoutEvery == 0 {
			start = time.Now()
			st, err := without.Load(ctx, id)
			if err != nil || st.Seq != 10_000 {
				b.Fatalf("load without snapshot: %d, %v", st.Seq, err)
			}
			tookWithout += time.Since(start)
			nWithout++
		}
	}
	b.StopTimer()
	msWith := tookWith.Seconds() * 1000 / float64(nWith)
	msWithout := tookWithout.Seconds() * 1000 / float64(nWithout)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(msWith, "with_snapshot_ms/load")
	b.ReportMetric(msWithout, "without_ms/load")
	b.ReportMetric(msWith/msWithout, "with_snapshot/without_ratio")
}
