package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	if err := c.Security.Validate(); err != nil {
		return fmt.Errorf("kafka: GroupStartConfig.Security: %w", err)
	}
	return nil
}

// StartGroup makes a consumer group that has never committed an offset
// begin where cfg.Start says: it creates the topics that do not exist yet
// (with the broker's default partitions) and commits, for every partition
// of cfg.Topics, the offset Start resolves to (the oldest record, the end,
// or the first record at or after a time; a time after every record
// resolves to the end). It returns true when it committed them. A group
// with any committed offset is left as it is and resumes where it
// stopped: the start applies once, at the group's first deployment, and
// is durable from then on, in Kafka itself.
//
// Call it before the group's subscribers join. When another member of the
// group is already running (it joined, so the broker refuses a commit
// from outside the group), StartGroup returns false and no error: the
// running member decided.
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
	committed, err := adm.FetchOffsets(ctx, cfg.Group)
	if err == nil {
		err = committed.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		err = nil // a group nobody ever joined (Kafka answers with no offsets; some brokers with this)
	}
	if err != nil {
		return false, wrap("fetch committed offsets", cfg.Security.wrapConnErr("admin client", cfg.Brokers, err))
	}
	has := false
	committed.Each(func(o kadm.OffsetResponse) { has = has || o.At >= 0 })
	if has {
		return false, nil
	}
	created, err := adm.CreateTopics(ctx, -1, -1, nil, cfg.Topics...)
	if err != nil {
		return false, wrap("create topics", err)
	}
	for _, r := range created.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return false, wrap("create topic "+r.Topic, r.Err)
		}
	}
	var listed kadm.ListedOffsets
	switch {
	case cfg.Start.IsEarliest():
		listed, err = adm.ListStartOffsets(ctx, cfg.Topics...)
	case cfg.Start.IsLatest():
		listed, err = adm.ListEndOffsets(ctx, cfg.Topics...)
	default:
		at, _ := cfg.Start.Time()
		listed, err = adm.ListOffsetsAfterMilli(ctx, at.UnixMilli(), cfg.Topics...)
	}
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return false, wrap("list offsets", err)
	}
	offsets := listed.Offsets()
	n := 0
	offsets.Each(func(kadm.Offset) { n++ })
	if n == 0 {
		return false, wrap("list offsets", errors.New("the topics have no partitions"))
	}
	resp, err := adm.CommitOffsets(ctx, cfg.Group, offsets)
	if err == nil {
		err = resp.Error()
	}
	if errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.RebalanceInProgress) {
		cfg.Logger.InfoContext(ctx, "consumer group already has members; leaving its start to them", "group", cfg.Group, "err", err)
		return false, nil
	}
	if err != nil {
		return false, wrap("commit offsets", err)
	}
	cfg.Logger.InfoContext(ctx, "consumer group starts", "group", cfg.Group, "start", cfg.Start.String(), "partitions", n)
	return true, nil
}
