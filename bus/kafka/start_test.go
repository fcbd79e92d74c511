package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
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

// TestATopicAddedToAGroupStartsWhereItsStartSaysAsOfThatDeployment: a
// group started at latest on topic a gets topic b, which holds 100 older
// records: b starts at its end, a keeps its offsets. While a member that
// reads only a runs (the previous deployment), a topic c added to the
// group cannot start (Kafka takes offsets from outside a group only when
// it is empty): StartGroup fails with ErrGroupBusy, or with NoWait leaves
// c alone; once the member has left, c starts at its end.
func TestATopicAddedToAGroupStartsWhereItsStartSaysAsOfThatDeployment(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	a, b, c := testenv.UniqueName(t, "added-a"), testenv.UniqueName(t, "added-b"), testenv.UniqueName(t, "added-c")
	group := testenv.UniqueName(t, "added-group")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	produce := func(topic string, n int) {
		for i := range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	committed := func(topic string) (sum int64, parts int) {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Topic == topic && o.At >= 0 {
				sum += o.At
				parts++
			}
		})
		return sum, parts
	}
	start := func(topics []string, noWait bool, timeout time.Duration) (bool, error) {
		return kafka.StartGroup(ctx, kafka.GroupStartConfig{Brokers: brokers, Group: group, Topics: topics, Start: bus.StartLatest,
			NoWait: noWait, Timeout: timeout})
	}

	produce(a, 5)
	if did, err := start([]string{a}, false, 0); err != nil || !did {
		t.Fatalf("first start = %v, %v; want true", did, err)
	}
	produce(a, 3) // read by the group, as it would be
	if _, err := adm.CommitOffsets(ctx, group, kadm.OffsetsFromRecords(kgo.Record{Topic: a, Partition: 0, Offset: 0})); err != nil {
		t.Fatal(err)
	}
	aBefore, _ := committed(a)

	produce(b, 100)
	if did, err := start([]string{a, b}, false, 0); err != nil || !did {
		t.Fatalf("start with b added = %v, %v; want true", did, err)
	}
	if sum, parts := committed(b); sum != 100 || parts == 0 {
		t.Errorf("b committed at %d over %d partitions, want its end (100): a topic added to a started group starts at latest", sum, parts)
	}
	if aAfter, _ := committed(a); aAfter != aBefore {
		t.Errorf("adding b moved a's committed offsets from %d to %d", aBefore, aAfter)
	}

	// A member of the previous deployment, reading a only, runs.
	obs := testenv.NewGroupObserver(t, brokers)
	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: brokers, ConsumerGroup: group, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	msgs, err := sub.Subscribe(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for m := range msgs {
			m.Ack()
		}
	}()
	waitMembers(t, obs, group, 1)
	produce(c, 10)
	if did, err := start([]string{a, b, c}, false, 2*time.Second); !errors.Is(err, kafka.ErrGroupBusy) || did {
		t.Errorf("start with c added while a member reading a runs = %v, %v; want ErrGroupBusy", did, err)
	}
	if did, err := start([]string{a, b, c}, true, 0); err != nil || did {
		t.Errorf("start with c added and NoWait = %v, %v; want false, nil", did, err)
	}
	if _, parts := committed(c); parts != 0 {
		t.Errorf("c has %d committed partitions while the group was busy, want none", parts)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if did, err := start([]string{a, b, c}, false, 0); err != nil || !did {
		t.Fatalf("start with c added once the member left = %v, %v; want true", did, err)
	}
	if sum, _ := committed(c); sum != 10 {
		t.Errorf("c committed at %d, want its end (10)", sum)
	}
}
