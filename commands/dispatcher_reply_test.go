package commands_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/eventstore/memstore"
)

// published is one message a capture publisher was given.
type published struct {
	topic string
	msg   *message.Message
}

// capture is a message.Publisher that keeps what it is given.
type capture struct {
	mu  sync.Mutex
	out []published
}

func (c *capture) Publish(topic string, msgs ...*message.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		c.out = append(c.out, published{topic, m})
	}
	return nil
}

func (c *capture) Close() error { return nil }

func (c *capture) take(t *testing.T) published {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.out) != 1 {
		t.Fatalf("%d answers published, want 1", len(c.out))
	}
	p := c.out[0]
	c.out = nil
	return p
}

func todoDispatcher(t *testing.T, replies message.Publisher, topics bus.Topics) (*commands.Dispatcher, *memstore.Store) {
	t.Helper()
	return todoDispatcherWith(t, commands.DispatcherConfig{Replies: replies, Topics: topics})
}

// todoDispatcherWith is a dispatcher of cfg running the todo domain's
// handlers on a fresh memory store, which is also its Outcomes.
func todoDispatcherWith(t *testing.T, cfg commands.DispatcherConfig) (*commands.Dispatcher, *memstore.Store) {
	t.Helper()
	store, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	handlers, err := todo.Domain().NewHandlers(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	var reg commands.Registry
	if err := reg.Register(handlers...); err != nil {
		t.Fatal(err)
	}
	cfg.Registry, cfg.Outcomes = &reg, store
	d, err := commands.NewDispatcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d, store
}

func createTodo(t *testing.T, id string, md map[string]string) *message.Message {
	t.Helper()
	cmd, err := commands.NewJSON(todo.CreateTodo, todo.AggregateType, id, todo.TodoData{Title: "answer me there"})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := cmd.ToMessage()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range md {
		msg.Metadata.Set(k, v)
	}
	return msg
}

// TestDispatcherAnswersWhereTheCommandAsks: a command's answer goes to
// the replies topic (and partition) its reply_to and reply_partition
// metadata name, keyed by the command id; without them, to the default
// replies topic on the key's partition.
func TestDispatcherAnswersWhereTheCommandAsks(t *testing.T) {
	topics := bus.Topics{Prefix: "t1."}
	for _, tc := range []struct {
		name             string
		md               map[string]string
		topic, partition string
	}{
		{"default", nil, "t1.commands.replies", ""},
		{"partition", map[string]string{commands.MetadataReplyPartition: "7"}, "t1.commands.replies", "7"},
		{"group topic", map[string]string{commands.MetadataReplyTo: "t1.commands.replies.saga.transfer"}, "t1.commands.replies.saga.transfer", ""},
		{"both", map[string]string{commands.MetadataReplyTo: "t1.commands.replies.billing", commands.MetadataReplyPartition: "0"}, "t1.commands.replies.billing", "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pub := &capture{}
			d, _ := todoDispatcher(t, pub, topics)
			msg := createTodo(t, "todo-"+tc.name, tc.md)
			if err := d.HandleMessage(msg); err != nil {
				t.Fatal(err)
			}
			got := pub.take(t)
			if got.topic != tc.topic || got.msg.Metadata.Get(bus.MetadataPartition) != tc.partition {
				t.Fatalf("answer on %s partition %q, want %s partition %q", got.topic, got.msg.Metadata.Get(bus.MetadataPartition), tc.topic, tc.partition)
			}
			if got.msg.Metadata.Get(bus.MetadataPartitionKey) != msg.UUID {
				t.Fatalf("answer keyed %q, want the command id %s", got.msg.Metadata.Get(bus.MetadataPartitionKey), msg.UUID)
			}
			res, err := commands.ResultFromMessage(got.msg)
			if err != nil || res.Status != commands.StatusAccepted || res.CommandID != msg.UUID {
				t.Fatalf("answer %+v, %v; want accepted for %s", res, err, msg.UUID)
			}
		})
	}
}

// TestDispatcherRefusesABadReplyRoute: a reply_to outside the replies
// topics (a command must not make the handlers write to any topic) or a
// reply_partition that is not a partition number makes the command
// invalid: nothing is appended, and the answer saying why goes to the
// default replies topic.
func TestDispatcherRefusesABadReplyRoute(t *testing.T) {
	topics := bus.Topics{}
	for _, md := range []map[string]string{
		{commands.MetadataReplyTo: "events.todo"},
		{commands.MetadataReplyTo: "commands.replies."},
		{commands.MetadataReplyTo: "commands.repliesX"},
		{commands.MetadataReplyTo: "commands.replies.a/b"},
		{commands.MetadataReplyTo: "other.commands.replies"},
		{commands.MetadataReplyPartition: "-1"},
		{commands.MetadataReplyPartition: "one"},
		{commands.MetadataReplyPartition: "01"},
		{commands.MetadataReplyPartition: "99999999999"},
	} {
		pub := &capture{}
		d, store := todoDispatcher(t, pub, topics)
		msg := createTodo(t, "t-bad", md)
		err := d.HandleMessage(msg)
		var invalid *commands.InvalidError
		var verr *eventstore.ValidationError
		if !errors.As(err, &invalid) || !errors.As(err, &verr) || !strings.HasPrefix(verr.Field, "reply_") {
			t.Fatalf("%v: error %v, want an *InvalidError wrapping a ValidationError on reply_to/reply_partition", md, err)
		}
		got := pub.take(t)
		res, rerr := commands.ResultFromMessage(got.msg)
		if got.topic != "commands.replies" || got.msg.Metadata.Get(bus.MetadataPartition) != "" || rerr != nil ||
			res.Status != commands.StatusInvalid || res.CommandID != msg.UUID {
			t.Fatalf("%v: answer %+v on %s, want invalid on commands.replies", md, res, got.topic)
		}
		if evs, err := store.Load(t.Context(), eventstore.Ref{Type: todo.AggregateType, ID: "t-bad"}, 0); !errors.Is(err, eventstore.ErrAggregateNotFound) {
			t.Fatalf("%v: the refused command left %d events (%v)", md, len(evs), err)
		}
	}
}
