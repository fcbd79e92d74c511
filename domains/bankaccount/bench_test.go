package bankaccount_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
)

// Sizes of the benchmarks' accounts, and how often they are snapshotted
// (as the snapshot consumer does by default) and the slower variants
// timed (one command of each per slowEvery).
const (
	longLog       = 10_000
	shortLog      = 10
	snapshotEvery = 100
	slowEvery     = 10
)

// BenchmarkHistoryRuleCommand10000VsTenEventsMemstore times one
// RecordTransaction command through the ledger with unique descriptions
// (a fold rule, UniqueDescriptionsDomain) on a 10,000-event account and
// on a 10-event one, both snapshotted every 100 commands, on the
// in-memory store; and on the long account, the same rule through a
// facet that keeps no folds in memory (FoldCache -1: every command reads
// the snapshot, as one landing on another process does) and the rule
// reading the whole log. It reports the mean times per command and their
// ratios to the short account's. Nothing about time is asserted.
func BenchmarkHistoryRuleCommand10000VsTenEventsMemstore(b *testing.B) {
	benchHistoryRuleCommand(b, newMemstore(b))
}

// BenchmarkHistoryRuleCommand10000VsTenEventsDynamoDB is the same on
// DynamoDB Local (skipped without the local stack).
func BenchmarkHistoryRuleCommand10000VsTenEventsDynamoDB(b *testing.B) {
	s, _, _ := newStore(b)
	benchHistoryRuleCommand(b, s)
}

func benchHistoryRuleCommand(b *testing.B, s eventstore.Store) {
	ctx := context.Background()
	desc := func(i int) string { return fmt.Sprintf("invoice %07d", i) }
	long, short := "acc-long", "acc-short"
	buildAccount(b, s, long, longLog, desc)
	buildAccount(b, s, short, shortLog, desc)
	d := bankaccount.UniqueDescriptionsDomain()
	fold := handlers(b, d, s)[bankaccount.RecordTransaction]
	whole := handlers(b, wholeLogDomain(), s)[bankaccount.RecordTransaction]
	uncached, err := eventstore.NewFacet(eventstore.FacetConfig[bankaccount.Account]{Store: s, AggregateType: bankaccount.AggregateType,
		Processor: bankaccount.UniqueDescriptions(), FoldCache: -1})
	if err != nil {
		b.Fatal(err)
	}
	noCache, err := commands.NewFacetHandler(commands.FacetHandlerConfig[bankaccount.Account]{CommandType: bankaccount.RecordTransaction,
		Facet: uncached, Decide: wholeLogDecider(bankaccount.RecordTransaction).Decide})
	if err != nil {
		b.Fatal(err)
	}
	snapshot, err := d.NewSnapshot(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	snap := func() {
		for _, id := range []string{long, short} {
			if _, err := snapshot(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
	}
	snap()
	n := longLog
	command := func(h commands.Handler, id string) time.Duration {
		n++
		cmd := commands.New(bankaccount.RecordTransaction, bankaccount.AggregateType, id, []byte(fmt.Sprintf(`{"desc":%q,"amount":1}`, desc(n))))
		start := time.Now()
		res, err := h.Handle(ctx, cmd)
		took := time.Since(start)
		if err != nil || res.Status != commands.StatusAccepted {
			b.Fatalf("command on %s: %+v, %v", id, res, err)
		}
		return took
	}
	var tookLong, tookShort, tookSnapshot, tookWhole time.Duration
	var nSlow int
	b.ResetTimer()
	for i := range b.N {
		if i > 0 && i%snapshotEvery == 0 {
			b.StopTimer()
			snap()
			b.StartTimer()
		}
		tookLong += command(fold, long)
		tookShort += command(fold, short)
		if i%slowEvery == 0 {
			tookSnapshot += command(noCache, long)
			tookWhole += command(whole, long)
			nSlow++
		}
	}
	b.StopTimer()
	usLong := float64(tookLong.Microseconds()) / float64(b.N)
	usShort := float64(tookShort.Microseconds()) / float64(b.N)
	usSnapshot := float64(tookSnapshot.Microseconds()) / float64(nSlow)
	usWhole := float64(tookWhole.Microseconds()) / float64(nSlow)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(usLong, "long_us/cmd")
	b.ReportMetric(usShort, "short_us/cmd")
	b.ReportMetric(usSnapshot, "long_from_snapshot_us/cmd")
	b.ReportMetric(usWhole, "whole_log_us/cmd")
	b.ReportMetric(usLong/usShort, "long/short_ratio")
	b.ReportMetric(usSnapshot/usShort, "long_from_snapshot/short_ratio")
	b.ReportMetric(usWhole/usShort, "whole_log/short_ratio")
}
