package privacy_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
	"github.com/eventpipe/eventpipe/privacy"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/readmodels"
	"github.com/eventpipe/eventpipe/testkit/integration"
	"github.com/jackc/pgx/v5/pgxpool"
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

// BenchmarkAppendSealedVsClear measures the write path with personal
// data: UpdateTodo (a title and a message, both personal) through the
// todo command handler on the DynamoDB store, sealed (a privacy.Sealer:
// the event's fields, the STATE, the key check in the transaction) and
// in clear (the same store without one), 8 todos updated at once, the
// two sides alternating in rounds. The keys are made before the timing
// (a key per todo, cached: the steady state). It reports both
// throughputs and their ratio (sealed/clear; the goal is ≥ 0.9).
func BenchmarkAppendSealedVsClear(b *testing.B) {
	r := newSealRig(b)
	clear := r.eventStore(b, nil)
	const todos = 8
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	for g := range todos {
		r.accept(b, todo.CreateTodo, todo.AggregateType, fmt.Sprintf("s-%s-%d", run, g), "u1", todo.TodoData{Title: "first"})
		if res, err := r.send(b, clear, todo.CreateTodo, todo.AggregateType, fmt.Sprintf("c-%s-%d", run, g), "u1", todo.TodoData{Title: "first"}); err != nil || res.Status != commands.StatusAccepted {
			b.Fatalf("%+v, %v", res, err)
		}
	}
	side := func(store eventstore.Store, prefix string, n int) time.Duration {
		b.Helper()
		hs, err := todo.Domain().NewHandlers(store, nil)
		if err != nil {
			b.Fatal(err)
		}
		var update commands.Handler
		for _, h := range hs {
			if h.CommandType() == todo.UpdateTodo {
				update = h
			}
		}
		start := time.Now()
		var wg sync.WaitGroup
		for g := range todos {
			wg.Go(func() {
				for i := g; i < n; i += todos {
					cmd, _ := todo.UpdateTodoCommand.New(todo.AggregateType, fmt.Sprintf("%s-%s-%d", prefix, run, g), todo.TodoData{Title: fmt.Sprintf("Call the dentist about Tuesday %d", i), Message: "Bring the insurance card and the referral"})
					if res, err := update.Handle(context.Background(), cmd); err != nil || res.Status != commands.StatusAccepted {
						b.Errorf("%+v, %v", res, err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	var sealedTime, clearTime time.Duration
	const rounds = 4
	per := max(todos, b.N/rounds)
	b.ResetTimer()
	for round := range rounds {
		if round%2 == 0 { // neither side always goes first
			clearTime += side(clear, "c", per)
			sealedTime += side(r.es, "s", per)
		} else {
			sealedTime += side(r.es, "s", per)
			clearTime += side(clear, "c", per)
		}
	}
	b.StopTimer()
	n := float64(rounds * per)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(n/sealedTime.Seconds(), "sealed_appends/s")
	b.ReportMetric(n/clearTime.Seconds(), "clear_appends/s")
	b.ReportMetric(clearTime.Seconds()/sealedTime.Seconds(), "throughput_ratio")
}

// BenchmarkConsumerOpenVsClear measures a consumer's work per event with
// and without opening: the todos read model's Applier on Postgres,
// applying batches of 100 events (a TodoCreated and a TodoUpdated each of
// 50 new todos) as they come from the bus, in clear, or sealed and opened
// first (privacy.Sealer.OpenEvent, each todo's key in the consumer's
// cache: a consumer that follows aggregates it has seen). The two sides
// alternate. It reports both throughputs and their ratio (opened/clear;
// the goal is ≥ 0.9). Kafka's part, the same on both sides, is left out.
func BenchmarkConsumerOpenVsClear(b *testing.B) {
	ctx := context.Background()
	r := newSealRig(b)
	consumerKeys := r.store(b, nil) // a consumer's own cache
	opener, err := privacy.NewSealer(privacy.SealerConfig{Keys: consumerKeys, Personal: map[string]map[string]privacy.Personal{todo.AggregateType: todo.Personal}})
	if err != nil {
		b.Fatal(err)
	}
	schema, url := integration.PostgresSchema(b, "bench")
	if _, err := pgmigrate.Migrate(ctx, pgmigrate.Config{URL: integration.Stack(b).Postgres, Schema: schema}); err != nil {
		b.Fatal(err)
	}
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(db.Close)
	applier, err := projections.NewApplier(projections.ApplierConfig{DB: db, Store: r.es, Projection: readmodels.Todos{}})
	if err != nil {
		b.Fatal(err)
	}
	const perBatch = 50 // todos, two events each
	batch := func(prefix string, sealed bool) []eventstore.Envelope {
		var out []eventstore.Envelope
		for i := range perBatch {
			ref := eventstore.Ref{Type: todo.AggregateType, ID: fmt.Sprintf("%s-%d", prefix, i)}
			req, err := eventstore.Prepare(ref, 0, eventstore.Change{Events: []eventstore.NewEvent{
				todo.TodoCreatedEvent.New(todo.TodoCreatedData{TodoData: todo.TodoData{Title: "Call the dentist about Tuesday", Message: "Bring the insurance card"}, Owner: "u1"}),
				todo.TodoUpdatedEvent.New(todo.TodoData{Title: "Call the dentist about Wednesday", Message: "Bring the insurance card and the referral"}),
			}}, eventstore.Schema{})
			if err != nil {
				b.Fatal(err)
			}
			for _, e := range req.Events {
				if sealed {
					if e, err = r.sealer.SealEvent(ctx, e); err != nil {
						b.Fatal(err)
					}
					if _, err := opener.OpenEvent(ctx, e); err != nil { // warm the consumer's cache
						b.Fatal(err)
					}
				}
				out = append(out, e)
			}
		}
		return out
	}
	const rounds = 4
	batches := max(1, b.N/rounds/(2*perBatch))
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	var clearTime, openTime time.Duration
	var events int
	b.ResetTimer()
	for round := range rounds {
		for i := range batches {
			b.StopTimer()
			clearBatch := batch(fmt.Sprintf("c-%s-%d-%d", run, round, i), false)
			sealedBatch := batch(fmt.Sprintf("s-%s-%d-%d", run, round, i), true)
			b.StartTimer()
			clearSide := func() {
				t0 := time.Now()
				if _, err := applier.Apply(ctx, clearBatch); err != nil {
					b.Fatal(err)
				}
				clearTime += time.Since(t0)
			}
			openSide := func() {
				t0 := time.Now()
				if err := eventstore.OpenEvents(ctx, opener, sealedBatch); err != nil {
					b.Fatal(err)
				}
				if _, err := applier.Apply(ctx, sealedBatch); err != nil {
					b.Fatal(err)
				}
				openTime += time.Since(t0)
			}
			if i%2 == 0 { // neither side always goes first
				clearSide()
				openSide()
			} else {
				openSide()
				clearSide()
			}
			events += len(clearBatch)
		}
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(events)/openTime.Seconds(), "opened_events/s")
	b.ReportMetric(float64(events)/clearTime.Seconds(), "clear_events/s")
	b.ReportMetric(clearTime.Seconds()/openTime.Seconds(), "throughput_ratio")
}
