package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestStartGroupCommitsWhereTheStartSaysOnceAndOnlyForANewGroup writes
// records before and after a moment t, then starts new groups at the
// earliest record, the latest, and t: each group's committed offsets skip
// exactly the records its start excludes, a second StartGroup changes
// nothing, and a topic that did not exist is created and started too.
func TestStartGroupCommitsWhereTheStartSaysOnceAndOnlyForANewGroup(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	topic := testenv.UniqueName(t, "start")
	missing := testenv.UniqueName(t, "start-missing")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	produce := func(n int, from int) {
		for i := range n {
			r := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", from+i)), Value: []byte("v")}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(20, 0)
	time.Sleep(50 * time.Millisecond)
	at := time.Now()
	time.Sleep(50 * time.Millisecond)
	produce(7, 20)

	committed := func(group string) (sum int64, parts int) {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Topic == topic {
				sum += o.At
				parts++
			}
		})
		return sum, parts
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	ends.Each(func(o kadm.ListedOffset) { end += o.Offset })
	if end != 27 {
		t.Fatalf("topic holds %d records, want 27", end)
	}
	for _, c := range []struct {
		start bus.Start
		want  int64 // committed offsets summed = records skipped
	}{
		{bus.StartEarliest, 0},
		{bus.StartLatest, 27},
		{bus.StartAt(at), 20},
		{bus.StartAt(at.Add(time.Hour)), 27},
	} {
		group := testenv.UniqueName(t, "start-group")
		did, err := kafka.StartGroup(ctx, kafka.GroupStartConfig{Brokers: brokers, Group: group, Topics: []string{topic, missing}, Start: c.start})
		if err != nil || !did {
			t.Fatalf("%s: StartGroup = %v, %v; want true", c.start, did, err)
		}
		sum, parts := committed(group)
		if sum != c.want || parts != len(ends[topic]) {
			t.Errorf("%s: committed %d over %d partitions, want %d over %d", c.start, sum, parts, c.want, len(ends[topic]))
		}
		// Once committed, the group resumes: a later start changes nothing.
		did, err = kafka.StartGroup(ctx, kafka.GroupStartConfig{Brokers: brokers, Group: group, Topics: []string{topic}, Start: bus.StartLatest})
		if err != nil || did {
			t.Fatalf("%s: second StartGroup = %v, %v; want false", c.start, did, err)
		}
		if again, _ := committed(group); again != sum {
			t.Errorf("%s: second StartGroup moved the offsets from %d to %d", c.start, sum, again)
		}
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := offs.Lookup(missing, 0); !ok {
			t.Errorf("%s: the missing topic was not created and started", c.start)
		}
	}
	for _, bad := range []bus.Start{{}, bus.StartHistory} {
		if _, err := kafka.StartGroup(ctx, kafka.GroupStartConfig{Brokers: brokers, Group: "g", Topics: []string{topic}, Start: bad}); err == nil {
			t.Errorf("start %s accepted", bad)
		}
	}
}
