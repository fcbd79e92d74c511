package pipeline_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/testkit/integration"
	"github.com/eventpipe/eventpipe/testkit/pipeline"
)

// TestAConsumerGetsEachAggregatesEventsInOrder sends commands to a few
// accounts at once to a handler consumer that sometimes takes a few
// milliseconds and sometimes nacks an event once: once settled, it got
// each account's events in sequence order, every one, a nacked one again
// right after it was nacked and before any later one, as Kafka delivers
// a partition.
func TestAConsumerGetsEachAggregatesEventsInOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	type delivery struct {
		seq    int64
		nacked bool
	}
	var mu sync.Mutex
	got := map[string][]delivery{}
	nackedOnce := map[string]bool{} // event ids
	nacks := 0
	cat := eventpipe.Builtin()
	h, err := eventpipe.Handler(eventpipe.HandlerConfig{Name: "order-check", Topics: []string{bus.EventsTopic(bankaccount.AggregateType)},
		Handler: func(m *message.Message) error {
			e, err := bus.EventFromMessage(m)
			if err != nil {
				return err
			}
			mu.Lock()
			nack := !nackedOnce[e.EventID] && rng.IntN(5) == 0
			if nack {
				nackedOnce[e.EventID] = true
				nacks++
			}
			var pause time.Duration
			if rng.IntN(3) == 0 {
				pause = time.Duration(rng.IntN(3000)) * time.Microsecond
			}
			got[e.AggregateID] = append(got[e.AggregateID], delivery{e.Sequence, nack})
			mu.Unlock()
			time.Sleep(pause)
			if nack {
				m.Nack() // the router's Ack after a nil error is then refused
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.AddConsumer(h); err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.Start(ctx, pipeline.Config{Catalog: cat, Consumers: []string{"order-check"}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()

	const accounts, transactions = 5, 30
	var wg sync.WaitGroup
	for a := range accounts {
		acc := fmt.Sprintf("acc-%d", a)
		cmds := []commands.Command{command(t, bankaccount.OpenAccount, bankaccount.AggregateType, acc, struct{}{})}
		for i := range transactions {
			cmds = append(cmds, command(t, bankaccount.RecordTransaction, bankaccount.AggregateType, acc,
				bankaccount.TransactionAcceptedData{Desc: fmt.Sprint("t", i), Amount: 1}))
		}
		wg.Go(func() { // one account's commands in turn, the accounts at once
			for _, c := range cmds {
				if res, err := p.Sender.SendAndWait(ctx, c); err != nil || res.Status != commands.StatusAccepted {
					t.Errorf("%s on %s: %+v, %v; want accepted", c.Type, acc, res, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	settle(t, ctx, p)

	mu.Lock()
	defer mu.Unlock()
	for a := range accounts {
		acc := fmt.Sprintf("acc-%d", a)
		stored, err := p.Store.Load(ctx, eventstore.Ref{Type: bankaccount.AggregateType, ID: acc}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(stored) != 1+transactions {
			t.Fatalf("%s has %d events, want %d", acc, len(stored), 1+transactions)
		}
		// The next sequence due: a nacked delivery leaves it due.
		want := int64(1)
		for i, d := range got[acc] {
			if d.seq != want {
				t.Fatalf("%s: delivery %d is sequence %d, want %d (deliveries %v)", acc, i, d.seq, want, got[acc])
			}
			if !d.nacked {
				want++
			}
		}
		if want != int64(len(stored))+1 {
			t.Fatalf("%s: the handler applied up to sequence %d, want %d (deliveries %v)", acc, want-1, len(stored), got[acc])
		}
	}
	if nacks == 0 {
		t.Fatal("the handler nacked nothing: the test did not check redeliveries")
	}
	t.Logf("%d events, %d nacked once", accounts*(1+transactions), nacks)
	if err := p.Err(); err != nil {
		t.Fatalf("the pipeline stopped: %v", err)
	}
}
