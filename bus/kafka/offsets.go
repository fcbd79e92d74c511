package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// offsetsRetryTimeout bounds how long an OffsetReader retries a failed
// request (franz-go's default is 30s), so that an unreachable broker does
// not hold a status reading up for long.
const offsetsRetryTimeout = 10 * time.Second

// OffsetReader reads many consumer groups' positions and many topics'
// offsets with one franz-go admin client, in a few broker round trips
// whatever their number: one metadata request for every topic named, then
// at once the start and end offsets of all of them and the committed
// offsets of all the groups (one OffsetFetch per group coordinator). With
// the same client it lists topics by prefix (TopicsWithPrefix) and
// describes consumer groups (DescribeGroup). It is safe for concurrent
// use; Close it when done.
type OffsetReader struct {
	cluster Cluster
	cl      *kgo.Client
	adm     *kadm.Client
}

// NewOffsetReader validates cluster and builds the client with its
// Security (TLS, SASL). It does not connect: the first reading does.
func NewOffsetReader(cluster Cluster) (*OffsetReader, error) {
	if len(cluster.Brokers) == 0 {
		return nil, errors.New("kafka: OffsetReader: Cluster.Brokers is empty")
	}
	secOpts, err := cluster.kgoOpts()
	if err != nil {
		return nil, fmt.Errorf("kafka: OffsetReader: %w", err)
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(cluster.Brokers...), kgo.ClientID("eventpipe-status"),
		kgo.RetryTimeout(offsetsRetryTimeout)}, secOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: offset reader client on %v: %w", cluster.Brokers, err)
	}
	return &OffsetReader{cluster: cluster, cl: cl, adm: kadm.NewClient(cl)}, nil
}

// Close closes the client.
func (r *OffsetReader) Close() { r.cl.Close() }

// TopicsWithPrefix lists the topics whose name is prefix followed by at
// least one character, sorted. It does not create topics.
func (r *OffsetReader) TopicsWithPrefix(ctx context.Context, prefix string) ([]string, error) {
	tds, err := r.adm.ListTopics(ctx)
	if err != nil {
		return nil, r.cluster.Security.wrapConnErr("list topics", r.cluster.Brokers, err)
	}
	var out []string
	for name := range tds {
		if strings.HasPrefix(name, prefix) && len(name) > len(prefix) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// GroupTopics is a consumer group and the topics it reads.
type GroupTopics struct {
	Group  string
	Topics []string
}

// OffsetsRequest is what OffsetReader.Read reads in one pass.
type OffsetsRequest struct {
	// Groups are measured as ConsumerLag measures one group.
	Groups []GroupTopics
	// Count are topics whose records are counted, as TopicMessages
	// counts them.
	Count []string
	// Newest are topics whose newest offsets are summed over their
	// partitions.
	Newest []string
}

// Validate reports the first empty group or topic name.
func (q OffsetsRequest) Validate() error {
	for _, g := range q.Groups {
		if g.Group == "" {
			return errors.New("kafka: OffsetsRequest.Groups has an empty group name")
		}
		if slices.Contains(g.Topics, "") {
			return fmt.Errorf("kafka: OffsetsRequest.Groups: group %s has an empty topic name", g.Group)
		}
	}
	if slices.Contains(q.Count, "") || slices.Contains(q.Newest, "") {
		return errors.New("kafka: OffsetsRequest has an empty topic name")
	}
	return nil
}

// GroupLag is one group's position, as OffsetReader.Read read it.
type GroupLag struct {
	Group string
	// Rows are as ConsumerLag returns them: one per partition of the
	// group's topics that exist, sorted by topic and partition.
	Rows []PartitionLag
	// Err says why the group could not be measured (its committed offsets
	// or its topics' offsets could not be read); Rows is nil then.
	Err error
}

// Offsets is one reading of OffsetReader.Read.
type Offsets struct {
	// Groups has one GroupLag per OffsetsRequest.Groups, in its order.
	Groups []GroupLag
	// Messages has, for every topic of OffsetsRequest.Count, the records
	// it holds (0 for a topic that does not exist).
	Messages map[string]int64
	// Newest has, for every topic of OffsetsRequest.Newest, its newest
	// offsets summed over its partitions (0 for a topic that does not
	// exist).
	Newest map[string]int64
	// TopicErrs has the topics of Count and Newest whose offsets could not
	// be read (their Messages and Newest are 0).
	TopicErrs map[string]error
}

// Read reads, with the reader's one client, the position and lag of every
// group of q on its topics (as ConsumerLag), the records of q.Count's
// topics (as TopicMessages) and the newest offsets of q.Newest's topics.
// Topics that do not exist yield no rows and count 0; nothing is created.
// A group or topic that cannot be read is reported in its GroupLag.Err or
// in TopicErrs and the rest is still read; the error is for a reading that
// failed as a whole (no metadata, offsets not listed).
func (r *OffsetReader) Read(ctx context.Context, q OffsetsRequest) (Offsets, error) {
	if err := q.Validate(); err != nil {
		return Offsets{}, err
	}
	out := Offsets{Messages: make(map[string]int64, len(q.Count)), Newest: make(map[string]int64, len(q.Newest)),
		TopicErrs: map[string]error{}}
	var names []string
	for _, g := range q.Groups {
		names = append(names, g.Topics...)
	}
	names = append(append(names, q.Count...), q.Newest...)
	slices.Sort(names)
	names = slices.Compact(names)
	for _, t := range q.Count {
		out.Messages[t] = 0
	}
	for _, t := range q.Newest {
		out.Newest[t] = 0
	}

	parts := map[string][]int32{}
	if len(names) > 0 {
		tds, err := r.adm.ListTopics(ctx, names...)
		if err != nil {
			return out, r.cluster.Security.wrapConnErr("metadata of "+fmt.Sprint(len(names))+" topics", r.cluster.Brokers, err)
		}
		for name, td := range tds {
			if errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
				continue
			}
			if td.Err != nil {
				return out, fmt.Errorf("kafka: metadata of topic %s: %w", name, td.Err)
			}
			for p := range td.Partitions {
				parts[name] = append(parts[name], p)
			}
			slices.Sort(parts[name])
		}
	}
	existing := make([]string, 0, len(parts))
	for t := range parts {
		existing = append(existing, t)
	}
	slices.Sort(existing)
	var groups []string
	for _, g := range q.Groups {
		if slices.ContainsFunc(g.Topics, func(t string) bool { return parts[t] != nil }) && !slices.Contains(groups, g.Group) {
			groups = append(groups, g.Group)
		}
	}

	// The start and end offsets of every topic and the committed offsets
	// of every group, at once.
	var (
		starts, ends     kadm.ListedOffsets
		startErr, endErr error
		committed        kadm.FetchOffsetsResponses
		wg               sync.WaitGroup
	)
	if len(existing) > 0 {
		wg.Go(func() { starts, startErr = r.adm.ListStartOffsets(ctx, existing...) })
		wg.Go(func() { ends, endErr = r.adm.ListEndOffsets(ctx, existing...) })
	}
	if len(groups) > 0 {
		wg.Go(func() { committed = r.adm.FetchManyOffsets(ctx, groups...) })
	}
	wg.Wait()
	if err := cmp.Or(startErr, endErr); err != nil {
		return out, fmt.Errorf("kafka: offsets of %d topics: %w", len(existing), err)
	}
	if err := ctx.Err(); err != nil {
		return out, err
	}

	spans := map[string]map[int32]offsetSpan{}
	topicErr := map[string]error{}
	for _, t := range existing {
		spans[t] = map[int32]offsetSpan{}
		for _, p := range parts[t] {
			s, okS := starts.Lookup(t, p)
			e, okE := ends.Lookup(t, p)
			var err error
			switch {
			case !okS || !okE:
				err = fmt.Errorf("kafka: no offsets listed for %s/%d", t, p)
			case s.Err != nil:
				err = fmt.Errorf("kafka: oldest offset of %s/%d: %w", t, p, s.Err)
			case e.Err != nil:
				err = fmt.Errorf("kafka: newest offset of %s/%d: %w", t, p, e.Err)
			}
			if err != nil {
				topicErr[t] = err
				break
			}
			spans[t][p] = offsetSpan{oldest: s.Offset, newest: e.Offset}
		}
	}
	for t := range out.Messages {
		if err := topicErr[t]; err != nil {
			out.TopicErrs[t] = err
			continue
		}
		for _, s := range spans[t] {
			out.Messages[t] += max(s.newest-s.oldest, 0)
		}
	}
	for t := range out.Newest {
		if err := topicErr[t]; err != nil {
			out.TopicErrs[t] = err
			continue
		}
		for _, s := range spans[t] {
			out.Newest[t] += s.newest
		}
	}

	for _, g := range q.Groups {
		gl := GroupLag{Group: g.Group}
		gl.Rows, gl.Err = groupLag(g, parts, spans, topicErr, committed)
		if gl.Err != nil {
			gl.Rows = nil
		}
		out.Groups = append(out.Groups, gl)
	}
	return out, nil
}

// offsetSpan is a partition's oldest and newest offsets.
type offsetSpan struct{ oldest, newest int64 }

// groupLag is g's rows: its committed offsets against its topics' spans.
func groupLag(g GroupTopics, parts map[string][]int32, spans map[string]map[int32]offsetSpan,
	topicErr map[string]error, committed kadm.FetchOffsetsResponses) ([]PartitionLag, error) {
	topics := slices.Clone(g.Topics)
	slices.Sort(topics)
	topics = slices.Compact(topics)
	var rows []PartitionLag
	var fetched kadm.FetchOffsetsResponse
	haveFetched := false
	for _, topic := range topics {
		if parts[topic] == nil {
			continue // does not exist yet
		}
		if err := topicErr[topic]; err != nil {
			return nil, err
		}
		if !haveFetched {
			var ok bool
			if fetched, ok = committed[g.Group]; !ok {
				return nil, fmt.Errorf("kafka: committed offsets of group %s: not fetched", g.Group)
			}
			if fetched.Err != nil && !errors.Is(fetched.Err, kerr.GroupIDNotFound) {
				return nil, fmt.Errorf("kafka: committed offsets of group %s: %w", g.Group, fetched.Err)
			}
			haveFetched = true
		}
		for _, p := range parts[topic] {
			s := spans[topic][p]
			row := PartitionLag{Topic: topic, Partition: p, Newest: s.newest, Committed: -1}
			if o, ok := fetched.Fetched.Lookup(topic, p); ok {
				if o.Err != nil {
					return nil, fmt.Errorf("kafka: committed offset of group %s on %s/%d: %w", g.Group, topic, p, o.Err)
				}
				row.Committed = max(o.At, -1)
			}
			from := row.Committed
			if from < 0 {
				from = s.oldest
			}
			row.Lag = max(row.Newest-from, 0)
			rows = append(rows, row)
		}
	}
	return rows, nil
}
