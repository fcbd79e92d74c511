package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestThousandConcurrentCommandsApplyExactlyOnce sends 1,000 transaction
// commands for 10 accounts concurrently through Kafka to the running
// handlers. Every command gets a result; each balance equals the sum of
// its accepted transactions; rejected ones (past the overdraft) say why
// and stored nothing.
func TestThousandConcurrentCommandsApplyExactlyOnce(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	const accounts, total, senders = 10, 1000, 40
	ep := rigs.Endpoints(t)
	svc := rigs.NewService(t, ep, testenv.UniqueName(t, "g"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- svc.RunCommandHandlers(ctx) }()
	defer func() { cancel(); <-done }()

	sender, err := kafka.NewSender(kafka.SenderConfig{Brokers: ep.KafkaBrokers, Topics: bus.Topics{Prefix: ep.TopicPrefix}, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	// Each command's answer may take long on a loaded machine; only one
	// that never comes fails (integration.HangAfter).
	sendAndWait := func(cmd commands.Command) (commands.Result, error) {
		wait, waitCancel := context.WithTimeout(ctx, integration.HangAfter())
		defer waitCancel()
		return sender.SendAndWait(wait, cmd)
	}
	id := func(i int) string { return fmt.Sprintf("acc-%d", i) }
	for i := range accounts {
		cmd, _ := commands.NewJSON(bankaccount.OpenAccount, bankaccount.AggregateType, id(i), struct{}{})
		if res, err := sendAndWait(cmd); err != nil || res.Status != commands.StatusAccepted {
			t.Fatalf("open %s: %+v, %v", id(i), res, err)
		}
	}

	type outcome struct {
		account string
		amount  int64
		res     commands.Result
	}
	work := make(chan int)
	results := make(chan outcome, total)
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				acc := id(n % accounts)
				// Mostly debits, some large, so the overdraft is hit.
				amount := int64(rand.IntN(120) - 90)
				if amount == 0 {
					amount = 1
				}
				cmd, _ := commands.NewJSON(bankaccount.RecordTransaction, bankaccount.AggregateType, acc, bankaccount.TransactionAcceptedData{Desc: fmt.Sprint(n), Amount: amount})
				res, err := sendAndWait(cmd)
				if err != nil {
					t.Errorf("command %d: %v", n, err)
					continue
				}
				results <- outcome{acc, amount, res}
			}
		}()
	}
	start := time.Now()
	for n := range total {
		work <- n
	}
	close(work)
	wg.Wait()
	close(results)
	elapsed := time.Since(start)

	sum := map[string]int64{}
	accepted := map[string]int{}
	rejected := 0
	for o := range results {
		switch o.res.Status {
		case commands.StatusAccepted:
			sum[o.account] += o.amount
			accepted[o.account]++
		case commands.StatusRejected:
			rejected++
			if !strings.Contains(o.res.Reason, "insufficient funds") {
				t.Errorf("rejection without the reason: %+v", o.res)
			}
		default:
			t.Errorf("unexpected result %+v", o.res)
		}
	}
	if rejected == 0 {
		t.Errorf("no transaction hit the overdraft; the test did not exercise rejection")
	}
	ledger, err := bankaccount.NewFacet(svc.Store, svc.Catalog().Upcasters())
	if err != nil {
		t.Fatal(err)
	}
	for i := range accounts {
		st, err := ledger.Get(context.Background(), id(i))
		if err != nil {
			t.Fatal(err)
		}
		evs := rigs.Events(t, svc, bankaccount.AggregateType, id(i))
		if st.Item.Balance != sum[id(i)] || len(evs) != 1+accepted[id(i)] || st.Seq != int64(len(evs)) {
			t.Errorf("%s: balance %d (want %d), %d events (want %d), version %d", id(i), st.Item.Balance, sum[id(i)], len(evs), 1+accepted[id(i)], st.Seq)
		}
	}
	t.Logf("%d commands (%d rejected) through Kafka in %s: %.0f commands/s", total, rejected, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds())
}
