package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/poison"
	"github.com/eventpipe/eventpipe/relay"
)

// PoisonTopic is a poison topic of the pipeline and whose it is.
type PoisonTopic struct {
	// Topic is its name, with the topic prefix.
	Topic string
	// Owner says whose poison topic it is: "command handlers", "relay
	// events", or a consumer's kind and name ("read model todos").
	Owner string
}

// PoisonTopics lists the poison topics of the pipeline cat describes in
// ep's namespace: the command handlers' (of commandGroup; ""
// is eventpipe.DefaultCommandGroup), each relay stream's, and every
// consumer's of the catalogue, whatever its kind
// (eventpipe.ConsumerInfo.PoisonTopic); the ones Status counts.
func PoisonTopics(cat *eventpipe.Catalog, ep eventpipe.Endpoints, commandGroup string) []PoisonTopic {
	if cat == nil {
		cat = eventpipe.Builtin()
	}
	if commandGroup == "" {
		commandGroup = eventpipe.DefaultCommandGroup
	}
	topics := bus.Topics{Prefix: ep.TopicPrefix}
	out := []PoisonTopic{{Topic: topics.Poison(commandGroup), Owner: "command handlers"}}
	for _, name := range eventpipe.RelayStreams() {
		out = append(out, PoisonTopic{Topic: topics.Poison(relay.PoisonGroupFor(name)), Owner: "relay " + name})
	}
	for _, name := range cat.ConsumerNames() {
		cons, _ := cat.Consumer(name)
		info := cons.Describe(topics)
		out = append(out, PoisonTopic{Topic: info.PoisonTopic, Owner: string(info.Kind) + " " + name})
	}
	return out
}

// PoisonMessage is a message of a poison topic, as PoisonList returns it.
type PoisonMessage struct {
	poison.Message
	// Owner is whose poison topic it is on (PoisonTopic.Owner).
	Owner string
	// Redrive is its recorded redrive (PoisonRedrive), nil when it was
	// never redriven, or when the redrives could not be read (see
	// PoisonListConfig.DB).
	Redrive *poison.Record
}

// PoisonListConfig configures PoisonList and PoisonShow.
type PoisonListConfig struct {
	// Process: the catalogue (the consumers whose poison topics are
	// read), the endpoints (Kafka: brokers, Security, the topic prefix;
	// Postgres) and the logger (defaults: see eventpipe.Process).
	eventpipe.Process
	// CommandGroup is the command handlers' group (default
	// eventpipe.DefaultCommandGroup).
	CommandGroup string
	// DB holds the recorded redrives (default:
	// eventpipe.OpenPostgres(Endpoints), closed before the call returns).
	// When they cannot be read (no table before `eventpipe migrate`),
	// messages are listed without.
	DB *pgxpool.Pool
	// Topic, when set, reads one poison topic (its full name, or the name
	// without the topic prefix); otherwise every one of PoisonTopics.
	Topic string
}

// Validate reports, as an *eventstore.ValidationError, the settings from
// the environment that could not be read (eventpipe.Process.Validate), a
// CommandGroup whose poison topic Kafka would refuse and a Topic that is
// no poison topic, the defaults filled (as PoisonList fills them).
func (c PoisonListConfig) Validate() error {
	if err := validProcess(&c.Process); err != nil {
		return err
	}
	return validPoisonSelection(c.Catalog, c.Endpoints, c.CommandGroup, c.Topic)
}

// validPoisonSelection checks a command group and a poison topic name
// ("": every one).
func validPoisonSelection(cat *eventpipe.Catalog, ep eventpipe.Endpoints, commandGroup, topic string) error {
	if commandGroup != "" {
		if err := bus.ValidateTopic(bus.Topics{Prefix: ep.TopicPrefix}.Poison(commandGroup)); err != nil {
			return invalid("CommandGroup", err.Error())
		}
	}
	_, err := selectPoisonTopics(cat, ep, commandGroup, topic)
	return err
}

// PoisonList returns the messages of the poison topics cfg selects, topic
// by topic in PoisonTopics order (then any other), each by partition and
// offset, with their recorded redrives. It reads each topic from its
// start to its end as of the call, outside any consumer group, and
// creates no topic. A poison topic that does not exist holds nothing.
func PoisonList(ctx context.Context, cfg PoisonListConfig) ([]PoisonMessage, error) {
	_ = cfg.FillProcess() // Validate reports Endpoints.Err
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("poison list: %w", err)
	}
	topics, err := selectPoisonTopics(cfg.Catalog, cfg.Endpoints, cfg.CommandGroup, cfg.Topic)
	if err != nil {
		return nil, fmt.Errorf("poison list: %w", err)
	}
	var db *pgxpool.Pool
	if d, closeDB, err := openDB(ctx, cfg.DB, cfg.Endpoints); err != nil {
		cfg.Logger.WarnContext(ctx, "poison list: recorded redrives not shown", "err", err)
	} else {
		defer closeDB()
		db = d
	}
	var out []PoisonMessage
	for _, t := range topics {
		msgs, err := poison.Read(ctx, poison.ReadConfig{Brokers: cfg.Endpoints.KafkaBrokers, Security: cfg.Endpoints.Kafka, Topic: t.Topic})
		if err != nil {
			return nil, fmt.Errorf("poison list: %w", err)
		}
		if len(msgs) == 0 {
			continue
		}
		var recs map[poison.Ref]poison.Record
		if db != nil {
			if recs, err = poison.Redrives(ctx, db, t.Topic); err != nil {
				cfg.Logger.WarnContext(ctx, "poison list: recorded redrives not shown", "topic", t.Topic, "err", err)
			}
		}
		for _, m := range msgs {
			pm := PoisonMessage{Message: m, Owner: t.Owner}
			if rec, ok := recs[m.Ref]; ok {
				pm.Redrive = &rec
			}
			out = append(out, pm)
		}
	}
	return out, nil
}

// PoisonPosition picks a message of a poison topic: its offset, on
// Partition, or on any partition when Partition is -1 (AnyPartition).
type PoisonPosition struct {
	Partition int32
	Offset    int64
}

// AnyPartition is a PoisonPosition.Partition that matches every
// partition.
const AnyPartition = -1

// String is "<partition>/<offset>", or "<offset>" for any partition.
func (p PoisonPosition) String() string {
	if p.Partition == AnyPartition {
		return fmt.Sprint(p.Offset)
	}
	return fmt.Sprintf("%d/%d", p.Partition, p.Offset)
}

// PoisonShow returns the message at pos of poison topic cfg.Topic
// (required), with its recorded redrive. No message there is an error
// wrapping ErrPoisonNotFound; an offset held by several partitions of the
// topic when pos names none is an *eventstore.ValidationError.
func PoisonShow(ctx context.Context, cfg PoisonListConfig, pos PoisonPosition) (PoisonMessage, error) {
	if cfg.Topic == "" {
		return PoisonMessage{}, fmt.Errorf("poison show: %w", &eventstore.ValidationError{Field: "Topic", Reason: "name a poison topic"})
	}
	msgs, err := PoisonList(ctx, cfg)
	if err != nil {
		return PoisonMessage{}, err
	}
	found, err := pickPoison(msgs, []PoisonPosition{pos})
	if err != nil {
		return PoisonMessage{}, fmt.Errorf("poison show: %w", err)
	}
	return found[0], nil
}

// ErrPoisonNotFound is wrapped when a poison topic holds no message at
// the position asked for.
var ErrPoisonNotFound = errors.New("no poison message at that position")

// pickPoison returns the messages of msgs at positions, in the order of
// positions.
func pickPoison(msgs []PoisonMessage, positions []PoisonPosition) ([]PoisonMessage, error) {
	var out []PoisonMessage
	for _, pos := range positions {
		var hits []PoisonMessage
		for _, m := range msgs {
			if m.Offset == pos.Offset && (pos.Partition == AnyPartition || m.Partition == pos.Partition) {
				hits = append(hits, m)
			}
		}
		switch len(hits) {
		case 0:
			return nil, fmt.Errorf("offset %s: %w", pos, ErrPoisonNotFound)
		case 1:
			out = append(out, hits[0])
		default:
			return nil, &eventstore.ValidationError{Field: "offset", Reason: fmt.Sprintf("offset %d is on %d partitions: give <partition>/<offset>", pos.Offset, len(hits))}
		}
	}
	return out, nil
}

// selectPoisonTopics returns the poison topics of the pipeline, or the
// one named topic (with or without the prefix). A name that is not one
// of them must at least be a poison topic name of the namespace.
func selectPoisonTopics(cat *eventpipe.Catalog, ep eventpipe.Endpoints, commandGroup, topic string) ([]PoisonTopic, error) {
	all := PoisonTopics(cat, ep, commandGroup)
	if topic == "" {
		return all, nil
	}
	for _, t := range all {
		if t.Topic == topic || t.Topic == ep.TopicPrefix+topic {
			return []PoisonTopic{t}, nil
		}
	}
	if !strings.HasPrefix(topic, ep.TopicPrefix) {
		topic = ep.TopicPrefix + topic
	}
	if !strings.HasPrefix(topic, bus.Topics{Prefix: ep.TopicPrefix}.Poison("")) || bus.ValidateTopic(topic) != nil {
		names := make([]string, len(all))
		for i, t := range all {
			names[i] = t.Topic
		}
		return nil, &eventstore.ValidationError{Field: "Topic", Reason: fmt.Sprintf("%q is not a poison topic (have %s)", topic, strings.Join(names, ", "))}
	}
	return []PoisonTopic{{Topic: topic, Owner: "?"}}, nil
}

// PoisonRedriveConfig configures PoisonRedrive.
type PoisonRedriveConfig struct {
	// Process and CommandGroup: as PoisonListConfig's (the endpoints'
	// Kafka publishes the copies too).
	eventpipe.Process
	CommandGroup string
	// DB holds poison_redrives and operator_actions (default:
	// eventpipe.OpenPostgres(Endpoints), closed before PoisonRedrive returns).
	DB *pgxpool.Pool
	// Publisher publishes the copies (default: a kafka.Publisher on
	// Endpoints, closed before PoisonRedrive returns). Its Publish must
	// return once the broker acknowledged.
	Publisher message.Publisher
	// Topic is the poison topic (full name, or without the prefix).
	// Required.
	Topic string
	// Positions are the messages to redrive; or All: every message of
	// the topic. One of them is required.
	Positions []PoisonPosition
	All       bool
	// Actor is who redrives (default DefaultActor()), and Reason why
	// (optional); both are recorded.
	Actor, Reason string
}

// Validate reports, as an *eventstore.ValidationError, the settings from
// the environment that could not be read (eventpipe.Process.Validate), an
// empty Topic or one that is no poison topic, a bad CommandGroup, and
// Positions and All both or neither given, the defaults filled (as
// PoisonRedrive fills them).
func (c PoisonRedriveConfig) Validate() error {
	if err := validProcess(&c.Process); err != nil {
		return err
	}
	switch {
	case c.Topic == "":
		return invalid("Topic", "name a poison topic")
	case c.All == (len(c.Positions) > 0):
		return invalid("Positions", "give the offsets to redrive, or All, not both")
	}
	for _, p := range c.Positions {
		if p.Offset < 0 || p.Partition < AnyPartition {
			return invalid("Positions", fmt.Sprintf("%s is not a position", p))
		}
	}
	return validPoisonSelection(c.Catalog, c.Endpoints, c.CommandGroup, c.Topic)
}

// PoisonRedriveResult is what PoisonRedrive did, message by message.
type PoisonRedriveResult struct {
	Results []poison.Result
	// Action is the operator action recorded for the call.
	Action OperatorAction
}

// Count returns how many results had outcome o.
func (r PoisonRedriveResult) Count(o poison.Outcome) int {
	n := 0
	for _, res := range r.Results {
		if res.Outcome == o {
			n++
		}
	}
	return n
}

// PoisonRedrive redrives the messages cfg selects from a poison topic to
// the topics they were poisoned from, each at most once in effect
// whatever how many times it is called (see poison.Redriver.Redrive for
// the exact guarantee), in order of the positions given (All: partition
// and offset order). A message already redriven is reported
// poison.AlreadyRedriven and not published; one without an origin topic
// (a relay's) is poison.Failed with poison.ErrNoOrigin. The call is
// recorded as one operator action (ActionPoisonRedrive), checked for
// before anything is published. It returns an error when it could not
// start (settings, an unknown topic or position, no table) or could not
// record the action; the messages' own failures are in the results.
// Fix the cause first: the consumer gets the message again as it was.
func PoisonRedrive(ctx context.Context, cfg PoisonRedriveConfig) (PoisonRedriveResult, error) {
	_ = cfg.FillProcess() // Validate reports Endpoints.Err
	if err := cfg.Validate(); err != nil {
		return PoisonRedriveResult{}, fmt.Errorf("poison redrive: %w", err)
	}
	if cfg.Actor == "" {
		cfg.Actor = DefaultActor()
	}
	db, closeDB, err := openDB(ctx, cfg.DB, cfg.Endpoints)
	if err != nil {
		return PoisonRedriveResult{}, fmt.Errorf("poison redrive: %w", err)
	}
	defer closeDB()
	if err := operatorReady(ctx, db); err != nil {
		return PoisonRedriveResult{}, fmt.Errorf("poison redrive: %w", err)
	}
	msgs, err := PoisonList(ctx, PoisonListConfig{Process: cfg.Process, CommandGroup: cfg.CommandGroup, DB: db, Topic: cfg.Topic})
	if err != nil {
		return PoisonRedriveResult{}, fmt.Errorf("poison redrive: %w", err)
	}
	if !cfg.All {
		if msgs, err = pickPoison(msgs, cfg.Positions); err != nil {
			return PoisonRedriveResult{}, fmt.Errorf("poison redrive: %s: %w", cfg.Topic, err)
		}
	}
	pub := cfg.Publisher
	if pub == nil {
		kp, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: cfg.Endpoints.KafkaBrokers, Security: cfg.Endpoints.Kafka,
			ClientID: "eventpipe-poison", Logger: watermill.NewSlogLogger(cfg.Logger)})
		if err != nil {
			return PoisonRedriveResult{}, fmt.Errorf("poison redrive: %w", err)
		}
		defer kp.Close()
		pub = kp
	}
	rd, err := poison.NewRedriver(poison.RedriverConfig{DB: db, Publisher: pub, Brokers: cfg.Endpoints.KafkaBrokers,
		Security: cfg.Endpoints.Kafka, Actor: cfg.Actor, Logger: cfg.Logger})
	if err != nil {
		return PoisonRedriveResult{}, fmt.Errorf("poison redrive: %w", err)
	}
	var res PoisonRedriveResult
	var offsets []string
	for _, m := range msgs {
		offsets = append(offsets, fmt.Sprintf("%d/%d", m.Partition, m.Offset))
	}
	topic := cfg.Topic
	if len(msgs) > 0 {
		topic = msgs[0].Topic
	}
	target := topic + " " + strings.Join(offsets, ",")
	if cfg.All {
		target = topic + " all (" + strings.Join(offsets, ",") + ")"
	}
	if res.Action, err = startOperatorAction(ctx, db, cfg.Logger, OperatorAction{Actor: cfg.Actor, Action: ActionPoisonRedrive,
		Target: target, Reason: cfg.Reason}); err != nil {
		return res, fmt.Errorf("poison redrive: %w", err)
	}
	for _, m := range msgs {
		res.Results = append(res.Results, rd.Redrive(ctx, m.Message))
	}
	parts := []string{}
	for _, o := range []poison.Outcome{poison.Redriven, poison.Recovered, poison.AlreadyRedriven, poison.Busy, poison.Failed} {
		if n := res.Count(o); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, o))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "nothing to redrive")
	}
	res.Action, err = finishOperatorAction(ctx, db, cfg.Logger, res.Action, strings.Join(parts, ", "))
	if err != nil {
		return res, fmt.Errorf("poison redrive: %w", err)
	}
	return res, nil
}
