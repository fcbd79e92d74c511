package e2e_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/todo"
)

// BenchmarkReplyLatency measures SendAndWait's round trip (publish the
// command, the command handlers append it to DynamoDB and answer, the
// sender reads the answer) with 1 sender and with 50 senders, each a
// kafka.Sender of its own (its own client and replies reader), at the
// same total rate: each b.N is one CreateTodo on each side, sent every
// 50 ms by the one sender or round-robin by the 50 (four rounds of each,
// alternating), so the handlers' load is the same and what differs is
// the number of readers. Each sender reads only its
// replies partition, so the answers a sender reads grow with its own
// commands rather than with all senders'. Reported: p50 and p99 of each,
// and the 50-sender p99 over the 1-sender p99 (the goal: ≤ 1.5).
// Nothing about time is asserted.
func BenchmarkReplyLatency(b *testing.B) {
	const many, interval = 50, 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ep := rigs.Endpoints(b)
	quiet := slog.New(slog.DiscardHandler)
	svc, err := eventpipe.NewWriteSide(ctx, eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: ep, Logger: quiet}, ConsumerGroup: testenv.UniqueName(b, "g")})
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close()
	var wg sync.WaitGroup
	wg.Go(func() { _ = svc.RunCommandHandlers(ctx) })
	defer func() { cancel(); wg.Wait() }()

	senders := make([]*kafka.Sender, many)
	for i := range senders {
		s, err := eventpipe.NewSender(eventpipe.SenderConfig{Process: eventpipe.Process{Endpoints: ep}})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		if _, err := s.ReplyPartition(); err != nil { // start its reader: not timed
			b.Fatal(err)
		}
		senders[i] = s
	}
	n := 0
	send := func(s *kafka.Sender) (time.Duration, error) {
		n++
		cmd, err := commands.NewJSON(todo.CreateTodo, todo.AggregateType, fmt.Sprintf("%s-%d", testenv.UniqueName(b, "t"), n), todo.TodoData{Title: "reply"})
		if err != nil {
			return 0, err
		}
		wait, done := context.WithTimeout(ctx, 30*time.Second)
		defer done()
		start := time.Now()
		res, err := s.SendAndWait(wait, cmd)
		if err == nil && res.Status != commands.StatusAccepted {
			err = fmt.Errorf("command %s: %s %s", cmd.ID, res.Status, res.Reason)
		}
		return time.Since(start), err
	}
	// run sends n commands, one every interval, through the first k
	// senders in turn, and returns each round trip.
	run := func(k, n int) []time.Duration {
		out := make([]time.Duration, n)
		errs := make(chan error, n)
		var inflight sync.WaitGroup
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := range n {
			<-tick.C
			s := senders[i%k]
			inflight.Go(func() {
				d, err := send(s)
				out[i] = d
				if err != nil {
					errs <- err
				}
			})
		}
		inflight.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		return out
	}
	for _, s := range senders[:2] { // warm the handlers and both paths: not timed
		if _, err := send(s); err != nil {
			b.Fatal(err)
		}
	}
	// Four rounds each, alternating, so that neither side gets the
	// run's warm-up or its quiet end alone.
	b.ResetTimer()
	var one, all []time.Duration
	for r := range 4 {
		n := b.N / 4
		if r < b.N%4 {
			n++
		}
		one = append(one, run(1, n)...)
		all = append(all, run(many, n)...)
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(percentile(one, 50)), "1sender_p50_ms")
	b.ReportMetric(ms(percentile(one, 99)), "1sender_p99_ms")
	b.ReportMetric(ms(percentile(all, 50)), "50senders_p50_ms")
	b.ReportMetric(ms(percentile(all, 99)), "50senders_p99_ms")
	b.ReportMetric(ms(percentile(all, 99))/ms(percentile(one, 99)), "p99_ratio")
}
