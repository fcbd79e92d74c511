package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/eventstore"
)

// GroupStartConfig configures StartGroup.
type GroupStartConfig struct {
	// Brokers are the seed brokers. Required.
	Brokers []string
	// Security is how the admin client connects: TLS and SASL (default:
	// the zero Security, plain text without authentication).
	Security Security
	// Group is the consumer group. Required.
	Group string
	// Topics are every topic the group reads. Required.
	Topics []string
	// Start is where the group begins: bus.StartEarliest,
	// bus.StartLatest or bus.StartAt(t). bus.StartHistory is resolved by
	// the caller (a read model starts its topics at a time before its
	// catch-up), and the zero Start is refused.
	Start bus.Start
	// Timeout bounds the whole call (default 30s).
	Timeout time.Duration
	// NoWait makes StartGroup return false at once, instead of waiting,
	// when topics are new to a group whose running members read none of
	// them: those topics then start where the subscribers' InitialOffset
	// says (the oldest record by default). For consumers whose effects are
	// idempotent and which are better for seeing history (read models),
	// so that a rolling deployment adding a topic does not wait for the
	// previous one to stop.
	NoWait bool
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *GroupStartConfig) setDefaults() {
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first missing or invalid field.
func (c GroupStartConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("kafka: GroupStartConfig: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch {
	case len(c.Brokers) == 0:
		return bad("Brokers", "is empty")
	case c.Group == "":
		return bad("Group", "is empty")
	case len(c.Topics) == 0:
		return bad("Topics", "is empty")
	case c.Start.IsDefault() || c.Start.IsHistory():
		return bad("Start", "is %s; want earliest, latest or a time", c.Start)
	case c.Timeout < 0:
		return bad("Timeout", "%v is negative", c.Timeout)
	}
	if err := c.Security.ValidateFor(c.Brokers); err != nil {
		return fmt.Errorf("kafka: GroupStartConfig.Security: %w", err)
	}
	return nil
}

// StartGroup makes every topic of cfg.Topics that the group has never
// committed an offset on begin where cfg.Start says: it creates the topics
// that do not exist yet (with the broker's default partitions) and
// commits, for every partition of those topics, the offset Start resolves
// to (the oldest record, the end, or the first record at or after a time;
// a time after every record resolves to the end). It returns true when it
// committed. A topic with any committed offset is left as it is and
// resumes where the group stopped: the start applies once per topic, at
// the deployment that first reads it (the group's first, or the one that
// added the topic), and is durable from then on, in Kafka itself.
//
// Call it before the group's subscribers join. Kafka takes offsets from
// outside a group only while the group is empty. When members are running
// and this is the group's first start, they decided it, and StartGroup
// returns false and no error. When the group has committed before and the
// topics are new to it, a running member that reads one of them decided
// too (false, no error); members that read none of them (the previous
// deployment, still running) are waited for until they leave, and
// StartGroup fails with ErrGroupBusy after cfg.Timeout if they do not (a
// consumer with side effects must not start a new topic at its oldest
// record), unless cfg.NoWait.
func StartGroup(ctx context.Context, cfg GroupStartConfig) (bool, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	wrap := func(what string, err error) error {
		return fmt.Errorf("kafka: start group %s at %s: %s: %w", cfg.Group, cfg.Start, what, err)
	}
	secOpts, err := cfg.Security.KgoOpts()
	if err != nil {
		return false, wrap("client", err)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.ClientID("eventpipe-group-start")}, secOpts...)...)
	if err != nil {
		return false, wrap("client", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		did, busy, err := startTopics(ctx, adm, cfg, wrap)
		if err != nil || busy == "" {
			return did, err
		}
		cfg.Logger.InfoContext(ctx, "waiting for the consumer group's running members to leave before its new topics start", "group", cfg.Group, "members", busy)
		select {
		case <-ctx.Done():
			return false, wrap("commit offsets", fmt.Errorf("%w: %s", ErrGroupBusy, busy))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// ErrGroupBusy is what StartGroup fails with when topics new to a group
// cannot start because members that do not read them keep running.
var ErrGroupBusy = errors.New("the group's running members read none of its new topics, and Kafka takes their start offsets only once the group is empty: stop the running members (deploy with the Recreate strategy)")

// startTopics is one attempt of StartGroup: it returns busy, a
// description of the running members, when they must be waited for.
func startTopics(ctx context.Context, adm *kadm.Client, cfg GroupStartConfig, wrap func(string, error) error) (did bool, busy string, err error) {
	committed, err := adm.FetchOffsets(ctx, cfg.Group)
	if err == nil {
		err = committed.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		err = nil // a group nobody ever joined (Kafka answers with no offsets; some brokers with this)
	}
	if err != nil {
		return false, "", wrap("fetch committed offsets", cfg.Security.wrapConnErr("admin client", cfg.Brokers, err))
	}
	resumed := map[string]bool{}
	committed.Each(func(o kadm.OffsetResponse) {
		if o.At >= 0 {
			resumed[o.Topic] = true
		}
	})
	var fresh []string
	for _, t := range cfg.Topics {
		if !resumed[t] && !slices.Contains(fresh, t) {
			fresh = append(fresh, t)
		}
	}
	if len(fresh) == 0 {
		return false, "", nil
	}
	created, err := adm.CreateTopics(ctx, -1, -1, nil, fresh...)
	if err != nil {
		return false, "", wrap("create topics", err)
	}
	for _, r := range created.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return false, "", wrap("create topic "+r.Topic, r.Err)
		}
	}
	var listed kadm.ListedOffsets
	switch {
	case cfg.Start.IsEarliest():
		listed, err = adm.ListStartOffsets(ctx, fresh...)
	case cfg.Start.IsLatest():
		listed, err = adm.ListEndOffsets(ctx, fresh...)
	default:
		at, _ := cfg.Start.Time()
		listed, err = adm.ListOffsetsAfterMilli(ctx, at.UnixMilli(), fresh...)
	}
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return false, "", wrap("list offsets", err)
	}
	offsets := listed.Offsets()
	n := 0
	offsets.Each(func(kadm.Offset) { n++ })
	if n == 0 {
		return false, "", wrap("list offsets", errors.New("the topics have no partitions"))
	}
	resp, err := adm.CommitOffsets(ctx, cfg.Group, offsets)
	if err == nil {
		err = resp.Error()
	}
	if errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.RebalanceInProgress) {
		if len(resumed) == 0 {
			cfg.Logger.InfoContext(ctx, "consumer group already has members; leaving its start to them", "group", cfg.Group, "err", err)
			return false, "", nil
		}
		members, reading, derr := groupReaders(ctx, adm, cfg.Group, fresh)
		if derr != nil {
			return false, "", wrap("describe group", derr)
		}
		if reading {
			cfg.Logger.InfoContext(ctx, "a running member of the consumer group reads its new topics; leaving their start to it", "group", cfg.Group, "topics", fresh)
			return false, "", nil
		}
		if members == "" {
			members = "none described yet (" + err.Error() + ")" // refused, yet nobody runs: try again
		} else if cfg.NoWait || cfg.Start.IsEarliest() { // earliest: what the subscribers do anyway
			cfg.Logger.InfoContext(ctx, "consumer group has running members that do not read its new topics; leaving their start to the subscribers", "group", cfg.Group, "topics", fresh, "members", members)
			return false, "", nil
		}
		return false, members, nil
	}
	if err != nil {
		return false, "", wrap("commit offsets", err)
	}
	if len(resumed) == 0 {
		cfg.Logger.InfoContext(ctx, "consumer group starts", "group", cfg.Group, "start", cfg.Start.String(), "partitions", n)
	} else {
		cfg.Logger.InfoContext(ctx, "consumer group starts on topics new to it", "group", cfg.Group, "topics", fresh, "start", cfg.Start.String(), "partitions", n)
	}
	return true, "", nil
}

// groupReaders describes group's running members and reports whether one
// of them reads one of topics.
func groupReaders(ctx context.Context, adm *kadm.Client, group string, topics []string) (members string, reading bool, err error) {
	described, err := adm.DescribeGroups(ctx, group)
	if err == nil {
		err = described.Error()
	}
	if err != nil {
		return "", false, err
	}
	var all []string
	for _, m := range described[group].Members {
		c, ok := m.Join.AsConsumer()
		if !ok {
			continue
		}
		var read []string
		for _, t := range c.Topics {
			read = append(read, t)
			reading = reading || slices.Contains(topics, t)
		}
		all = append(all, fmt.Sprintf("%s (%s, reading %v)", m.MemberID, m.ClientHost, read))
	}
	return strings.Join(all, ", "), reading, nil
}
