package privacy_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/privacy"
)

// BenchmarkSealPayload measures sealing and opening a todo's payload (two
// personal fields) with its key cached, against decoding and encoding
// the same payload in clear: the JSON work every sealing does anyway.
// Figures: ns per clear round trip, per seal and per open (no ratio: the
// cost that matters, an append's, is measured where appends are).
func BenchmarkSealPayload(b *testing.B) {
	ctx := context.Background()
	keys := newKeysRig(b).store(b, nil)
	p := privacy.Personal{Subject: "/owner", Fields: []string{"/title", "/message"}}
	bind := privacy.Binding{AggregateType: "todo", AggregateID: "t1", Item: "event/TodoCreated/1"}
	payload := []byte(`{"owner":"alice","title":"Call the dentist about Tuesday","message":"Bring the insurance card and the referral","completed":false}`)
	sealed, err := privacy.SealPayload(ctx, keys, p, bind, payload) // makes the key
	if err != nil {
		b.Fatal(err)
	}
	const n = 5000
	clear := timeEach(n, func() {
		if _, _, err := privacy.OpenPayload(ctx, keys, privacy.Personal{Subject: "/owner", Fields: []string{"/absent"}}, bind, payload); err != nil {
			b.Fatal(err)
		}
	})
	seal := timeEach(n, func() {
		if _, err := privacy.SealPayload(ctx, keys, p, bind, payload); err != nil {
			b.Fatal(err)
		}
	})
	open := timeEach(n, func() {
		if _, _, err := privacy.OpenPayload(ctx, keys, p, bind, sealed); err != nil {
			b.Fatal(err)
		}
	})
	for range b.N {
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(clear.Nanoseconds()), "clear_json_ns")
	b.ReportMetric(float64(seal.Nanoseconds()), "seal_ns")
	b.ReportMetric(float64(open.Nanoseconds()), "open_ns")
}

// BenchmarkKeyCache opens values of 2,000 scopes whose use follows a Zipf
// law (a few hot aggregates, a long tail) with a cache of 200 keys: the
// hit ratio, and the time of a look-up that hits against one that
// misses (a DynamoDB read and a KMS Decrypt).
func BenchmarkKeyCache(b *testing.B) {
	ctx := context.Background()
	rig := newKeysRig(b)
	maker := rig.store(b, nil)
	const scopes, lookups = 2000, 20000
	for i := range scopes {
		if _, err := maker.KeyForSealing(ctx, fmt.Sprintf("todo/t%d", i), fmt.Sprintf("user%d", i%500)); err != nil {
			b.Fatal(err)
		}
	}
	keys := rig.store(b, func(c *privacy.KeyStoreConfig) { c.CacheSize = 200; c.CacheTTL = time.Hour })
	zipf := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.1, 1, scopes-1)
	var hitTime, missTime time.Duration
	var hits, misses int
	for range lookups {
		scope := fmt.Sprintf("todo/t%d", zipf.Uint64())
		before := keys.Stats().Hits
		start := time.Now()
		if _, err := keys.KeyForOpening(ctx, scope); err != nil {
			b.Fatal(err)
		}
		if keys.Stats().Hits > before {
			hitTime += time.Since(start)
			hits++
		} else {
			missTime += time.Since(start)
			misses++
		}
	}
	for range b.N {
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(keys.Stats().HitRatio(), "hit_fraction")
	b.ReportMetric(float64(hitTime.Nanoseconds())/float64(max(hits, 1)), "hit_ns")
	b.ReportMetric(float64(missTime.Microseconds())/float64(max(misses, 1)), "miss_us")
}

// timeEach is the mean time of one call of f over n calls.
func timeEach(n int, f func()) time.Duration {
	start := time.Now()
	for range n {
		f()
	}
	return time.Since(start) / time.Duration(n)
}
