package kafka_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
)

// adminClient is a franz-go admin client on brokers, closed at the end of
// the test.
func adminClient(t *testing.T, brokers []string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// TestOffsetReaderReadsWhatConsumerLagAndTopicMessagesRead measures, in
// one reading, five groups on two topics (one whose first records were
// deleted) and a topic that does not exist: a group that committed
// everything, one that committed part of it, one that committed nothing,
// one on both topics and the missing one, and one on the missing topic
// only. Each group's rows, the records counted and the newest offsets are
// those of ConsumerLag (one client per group) and TopicMessages, and the
// missing topic is not created.
func TestOffsetReaderReadsWhatConsumerLagAndTopicMessagesRead(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	ctx := context.Background()
	a, b := testenv.UniqueName(t, "offsets-a"), testenv.UniqueName(t, "offsets-b")
	missing := testenv.UniqueName(t, "offsets-missing")
	publishKeyed(t, brokers, a, 60)
	publishKeyed(t, brokers, b, 15)
	adm := adminClient(t, brokers)
	ends, err := adm.ListEndOffsets(ctx, a, b)
	if err != nil || ends.Error() != nil {
		t.Fatalf("end offsets: %v %v", err, ends.Error())
	}
	// The first record of a's partitions that have two or more is deleted:
	// a group without commits lags from the oldest offset left.
	deleteBefore := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Topic == a && o.Offset >= 2 {
			deleteBefore.AddOffset(o.Topic, o.Partition, 1, -1)
		}
	})
	if len(deleteBefore[a]) == 0 {
		t.Fatalf("no partition of %s has two records: %+v", a, ends)
	}
	if resp, err := adm.DeleteRecords(ctx, deleteBefore); err != nil || resp.Error() != nil {
		t.Fatalf("delete records: %v %v", err, resp.Error())
	}
	commit := func(group string, at func(o kadm.ListedOffset) int64) {
		t.Helper()
		offs := kadm.Offsets{}
		ends.Each(func(o kadm.ListedOffset) {
			if n := at(o); n >= 0 {
				offs.AddOffset(o.Topic, o.Partition, n, -1)
			}
		})
		resp, err := adm.CommitOffsets(ctx, group, offs)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("commit %s: %v", group, err)
		}
	}
	prefix := testenv.UniqueName(t, "g") + "-"
	groups := []kafka.GroupTopics{
		{Group: prefix + "all", Topics: []string{a}},
		{Group: prefix + "part", Topics: []string{a}},
		{Group: prefix + "none", Topics: []string{a}},
		{Group: prefix + "two", Topics: []string{missing, b, a}},
		{Group: prefix + "missing", Topics: []string{missing}},
	}
	commit(groups[0].Group, func(o kadm.ListedOffset) int64 {
		if o.Topic != a {
			return -1
		}
		return o.Offset
	})
	commit(groups[1].Group, func(o kadm.ListedOffset) int64 {
		if o.Topic != a || o.Partition%2 == 1 {
			return -1
		}
		return o.Offset / 2
	})
	commit(groups[3].Group, func(o kadm.ListedOffset) int64 { return o.Offset / 3 })

	q := kafka.OffsetsRequest{Groups: groups, Count: []string{a, b, missing, a}, Newest: []string{b, missing}}
	var got kafka.Offsets
	for range 2 { // the second pass sees whether the first created the missing topic
		r, err := kafka.NewOffsetReader(kafka.Cluster{Brokers: brokers})
		if err != nil {
			t.Fatal(err)
		}
		got, err = r.Read(ctx, q)
		r.Close()
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
	}

	if len(got.Groups) != len(groups) || len(got.TopicErrs) != 0 {
		t.Fatalf("read %d groups (topic errors %v), want %d", len(got.Groups), got.TopicErrs, len(groups))
	}
	wantLag := map[string]int64{}
	for i, g := range groups {
		want, err := kafka.ConsumerLag(ctx, kafka.Cluster{Brokers: brokers}, g.Group, g.Topics)
		if err != nil {
			t.Fatal(err)
		}
		gl := got.Groups[i]
		if gl.Group != g.Group || gl.Err != nil || !reflect.DeepEqual(gl.Rows, want) {
			t.Errorf("group %s: read %+v, ConsumerLag %+v", g.Group, gl, want)
		}
		wantLag[g.Group] = totalLag(want)
	}
	counts, err := kafka.TopicMessages(ctx, kafka.Cluster{Brokers: brokers}, []string{a, b, missing})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Messages, counts) {
		t.Errorf("messages %v, TopicMessages %v", got.Messages, counts)
	}
	var newestB int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Topic == b {
			newestB += o.Offset
		}
	})
	if want := map[string]int64{b: newestB, missing: 0}; !reflect.DeepEqual(got.Newest, want) {
		t.Errorf("newest %v, want %v", got.Newest, want)
	}

	// The figures themselves, so that an agreement on wrong ones fails too.
	deleted := int64(len(deleteBefore[a]))
	if counts[a] != 60-deleted || counts[b] != 15 || newestB != 15 {
		t.Errorf("records: %s %d, want %d; %s %d (newest %d), want 15", a, counts[a], 60-deleted, b, counts[b], newestB)
	}
	if wantLag[prefix+"all"] != 0 || wantLag[prefix+"none"] != 60-deleted || wantLag[prefix+"missing"] != 0 ||
		len(got.Groups[4].Rows) != 0 {
		t.Errorf("lags %v, want all 0, none %d, missing 0 and no rows", wantLag, 60-deleted)
	}
	if l := wantLag[prefix+"part"]; l <= 0 || l >= 60 {
		t.Errorf("part: lag %d, want between 0 and 60", l)
	}
	tds, err := adm.ListTopics(ctx, missing)
	if err != nil {
		t.Fatal(err)
	}
	if td, ok := tds[missing]; ok && td.Err == nil {
		t.Errorf("reading created %s", missing)
	}
}

// TestOffsetReaderListsTopicsWithAPrefix: the topics named prefix and at
// least one character more, sorted; not the prefix itself.
func TestOffsetReaderListsTopicsWithAPrefix(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	prefix := testenv.UniqueName(t, "prefixed") + "."
	for _, topic := range []string{prefix + "b", prefix + "a", prefix} {
		publishKeyed(t, brokers, topic, 1)
	}
	r, err := kafka.NewOffsetReader(kafka.Cluster{Brokers: brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := r.TopicsWithPrefix(context.Background(), prefix)
	if want := []string{prefix + "a", prefix + "b"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("TopicsWithPrefix = %v, %v; want %v", got, err, want)
	}
}

func TestOffsetsRequestValidateRejectsEmptyNames(t *testing.T) {
	for name, q := range map[string]kafka.OffsetsRequest{
		"empty group":       {Groups: []kafka.GroupTopics{{Topics: []string{"t"}}}},
		"empty group topic": {Groups: []kafka.GroupTopics{{Group: "g", Topics: []string{""}}}},
		"empty count topic": {Count: []string{""}},
		"empty newest":      {Newest: []string{"t", ""}},
	} {
		if err := q.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, q)
		}
	}
	if _, err := kafka.NewOffsetReader(kafka.Cluster{}); err == nil {
		t.Error("NewOffsetReader without brokers was accepted")
	}
}
