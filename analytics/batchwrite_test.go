package analytics_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/eventstore"
)

// memoryWriter is a fake BatchWriteItem: it keeps the event ids it
// stores and hands back, as UnprocessedItems, the last hold(call, n) of
// the n requests of each call (call counts from 0). Its other methods
// are not implemented.
type memoryWriter struct {
	analytics.API
	hold func(call, n int) int

	mu     sync.Mutex
	calls  []time.Time
	stored []string
}

func (m *memoryWriter) BatchWriteItem(_ context.Context, in *ddb.BatchWriteItemInput, _ ...func(*ddb.Options)) (*ddb.BatchWriteItemOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := &ddb.BatchWriteItemOutput{UnprocessedItems: map[string][]types.WriteRequest{}}
	for table, reqs := range in.RequestItems {
		keep := len(reqs) - m.hold(len(m.calls), len(reqs))
		for _, r := range reqs[:keep] {
			m.stored = append(m.stored, r.PutRequest.Item["eventId"].(*types.AttributeValueMemberS).Value)
		}
		if keep < len(reqs) {
			out.UnprocessedItems[table] = reqs[keep:]
		}
	}
	m.calls = append(m.calls, time.Now())
	return out, nil
}

// fakeStore is a store on w; mod adjusts the config.
func fakeStore(t *testing.T, w *memoryWriter, mod func(*analytics.Config)) *analytics.Store {
	t.Helper()
	cfg := analytics.Config{Client: w, BackoffBase: time.Millisecond, BackoffMax: 4 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	s, err := analytics.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func batch(n int) []analytics.EventInput {
	in := make([]analytics.EventInput, n)
	for i := range in {
		in[i] = analytics.EventInput{Type: "click", SessionID: "s"}
	}
	return in
}

func ids(events []analytics.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.EventID
	}
	return out
}

// TestIngestRetriesUnprocessedItemsUntilAllAreWritten hands back half of
// every call's items as unprocessed and checks that Ingest sends them
// again, 25 a call at most, until all 60 are stored.
func TestIngestRetriesUnprocessedItemsUntilAllAreWritten(t *testing.T) {
	w := &memoryWriter{hold: func(_, n int) int { return n / 2 }}
	events, err := fakeStore(t, w, nil).Ingest(context.Background(), "site", batch(60))
	if err != nil {
		t.Fatal(err)
	}
	// 25 → 12 → 6 → 3 → 1 → 0 unprocessed is 5 calls; 10 → 5 → 2 → 1 → 0 is 4.
	if len(w.calls) != 5+5+4 {
		t.Errorf("%d BatchWriteItem calls, want 14", len(w.calls))
	}
	got, want := slices.Sorted(slices.Values(w.stored)), slices.Sorted(slices.Values(ids(events)))
	if len(events) != 60 || !slices.Equal(got, want) {
		t.Errorf("stored %d items, returned %d events; want the same 60", len(got), len(events))
	}
}

// TestIngestGivesUpAfterWriteAttemptsNamingWhatWasNotWritten keeps 3 of
// the second call's 5 items unprocessed for ever: after WriteAttempts
// calls Ingest returns the 27 events written and a *WriteError naming
// the 3 that were not.
func TestIngestGivesUpAfterWriteAttemptsNamingWhatWasNotWritten(t *testing.T) {
	w := &memoryWriter{hold: func(call, n int) int {
		if call == 0 {
			return 0
		}
		return min(3, n)
	}}
	events, err := fakeStore(t, w, func(c *analytics.Config) { c.WriteAttempts = 3 }).Ingest(context.Background(), "site", batch(30))
	var we *analytics.WriteError
	if !errors.As(err, &we) {
		t.Fatalf("Ingest = %v, want a *WriteError", err)
	}
	if we.Written != 27 || we.NotWritten != 3 || !slices.Equal(we.Unwritten, []int{27, 28, 29}) {
		t.Errorf("WriteError %+v, want 27 written and events 27–29 not", we)
	}
	if len(w.calls) != 1+3 {
		t.Errorf("%d calls, want 1 for the first 25 events and 3 attempts for the rest", len(w.calls))
	}
	if !slices.Equal(slices.Sorted(slices.Values(ids(events))), slices.Sorted(slices.Values(w.stored))) {
		t.Errorf("returned %d events, stored %d; want the same", len(events), len(w.stored))
	}
	if eventstore.IsPermanent(err) {
		t.Errorf("a write failure is permanent: %v", err)
	}
}

// TestIngestBacksOffExponentiallyWithJitter records the jitter ranges
// asked of Config.Rand and the gaps between attempts: the wait doubles
// from BackoffBase up to BackoffMax, and is never below its lower half.
func TestIngestBacksOffExponentiallyWithJitter(t *testing.T) {
	var mu sync.Mutex
	var ranges []int
	w := &memoryWriter{hold: func(_, n int) int { return n }}
	st := fakeStore(t, w, func(c *analytics.Config) {
		c.WriteAttempts = 5
		c.BackoffBase, c.BackoffMax = 20*time.Millisecond, 80*time.Millisecond
		c.Rand = func(n int) int {
			if n != 100 { // not a shard
				mu.Lock()
				ranges = append(ranges, n)
				mu.Unlock()
			}
			return 0
		}
	})
	if _, err := st.Ingest(context.Background(), "site", batch(1)); err == nil {
		t.Fatal("Ingest succeeded with every item unprocessed")
	}
	waits := []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond, 80 * time.Millisecond}
	var want []int
	for _, d := range waits {
		want = append(want, int(d/2)+1)
	}
	if !slices.Equal(ranges, want) {
		t.Errorf("jitter ranges %v, want %v", ranges, want)
	}
	for i := 1; i < len(w.calls); i++ {
		if gap := w.calls[i].Sub(w.calls[i-1]); gap < waits[i-1]/2 {
			t.Errorf("attempt %d came %v after the previous one, want at least %v", i+1, gap, waits[i-1]/2)
		}
	}
}

// TestIngestStopsBackingOffWhenTheContextEnds gives a backoff of an hour
// and a context of 100 ms: Ingest returns at the deadline with a
// *WriteError that wraps it.
func TestIngestStopsBackingOffWhenTheContextEnds(t *testing.T) {
	w := &memoryWriter{hold: func(_, n int) int { return n }}
	st := fakeStore(t, w, func(c *analytics.Config) { c.BackoffBase, c.BackoffMax = time.Hour, time.Hour })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	events, err := st.Ingest(ctx, "site", batch(10))
	var we *analytics.WriteError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &we) || we.NotWritten != 10 || len(events) != 0 {
		t.Fatalf("Ingest = %d events, %v; want none and a *WriteError wrapping the deadline", len(events), err)
	}
	if elapsed := time.Since(start); elapsed > 30*time.Second {
		t.Errorf("Ingest returned after %v, long after its context ended", elapsed)
	}
	if len(w.calls) != 1 {
		t.Errorf("%d calls, want 1", len(w.calls))
	}
}
