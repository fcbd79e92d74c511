package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/dev/testservers"
	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// TestMain turns the test binary into a child process when a test
// started it as one: a serve child (writeside_child_test.go), a saga child
// (rigs.TransferRig.StartSaga), an analytics serve or aggregator child
// (writeside_analytics_idempotent_test.go), an HTTP API child
// (writeside_idempotency_test.go), a consumers child
// (privacy_forget_test.go) or a Kafka broker (the crash tests that run
// their own broker).
func TestMain(m *testing.M) {
	integration.RunChild(map[string]integration.Main{"consume": consumeChild})
	runServeChildIfRequested()
	rigs.RunSagaChildIfRequested()
	runAnalyticsChildIfRequested()
	runHTTPChildIfRequested()
	testservers.RunChildIfRequested()
	os.Exit(m.Run())
}

func mustCmd(t *testing.T, typ, aggType, id string, payload any) commands.Command {
	t.Helper()
	cmd, err := commands.NewJSON(typ, aggType, id, payload)
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

// partitions returns the distinct partition keys in the events table
// that hold aggregate data (events, metadata, STATE, snapshots, outbox):
// every item but the COMMAND# records of answered commands, which refused
// commands leave behind by design.
func partitions(t *testing.T, ep endpoints.Endpoints) []string {
	t.Helper()
	db := testenv.DynamoDB(t)
	out, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: &ep.EventsTable, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var pks []string
	for _, it := range out.Items {
		if strings.HasPrefix(it["sk"].(*ddbtypes.AttributeValueMemberS).Value, "COMMAND#") {
			continue
		}
		pk := it["pk"].(*ddbtypes.AttributeValueMemberS).Value
		if !seen[pk] {
			seen[pk] = true
			pks = append(pks, pk)
		}
	}
	return pks
}

// TestDispatchTodoLifecycleOutcomes runs the todo commands in-process
// against DynamoDB Local and checks every outcome and what was stored.
func TestDispatchTodoLifecycleOutcomes(t *testing.T) {
	ctx := context.Background()
	svc := rigs.NewService(t, rigs.Endpoints(t), testenv.UniqueName(t, "g"))
	d := svc.Dispatcher
	create := rigs.TodoCmd(t, todo.CreateTodo, "t1", todo.TodoData{Title: "write tests"}, rigs.Ver(0))

	res, err := d.Dispatch(ctx, create)
	if err != nil || res.Status != commands.StatusAccepted || res.Version != 1 || len(res.EventIDs) != 1 {
		t.Fatalf("create: %+v, %v", res, err)
	}
	// The same command again (a redelivery) is answered with the original
	// outcome and appends nothing.
	again, err := d.Dispatch(ctx, create)
	if err != nil || again.Status != commands.StatusAccepted || !again.Duplicate || again.Version != 1 || again.EventIDs[0] != res.EventIDs[0] {
		t.Fatalf("redelivered create: %+v, %v", again, err)
	}
	checks := []struct {
		name   string
		cmd    commands.Command
		status commands.Status
	}{
		{"create existing", rigs.TodoCmd(t, todo.CreateTodo, "t1", todo.TodoData{Title: "x"}, nil), commands.StatusConflict},
		{"stale version", rigs.TodoCmd(t, todo.UpdateTodo, "t1", todo.TodoData{Title: "x"}, rigs.Ver(0)), commands.StatusConflict},
		{"update unknown", rigs.TodoCmd(t, todo.UpdateTodo, "nope", todo.TodoData{Title: "x"}, nil), commands.StatusNotFound},
		{"delete unknown", rigs.TodoCmd(t, todo.DeleteTodo, "nope", struct{}{}, nil), commands.StatusNotFound},
	}
	for _, c := range checks {
		res, err := d.Dispatch(ctx, c.cmd)
		if err != nil || res.Status != c.status || res.Duplicate {
			t.Errorf("%s: %+v, %v; want %s", c.name, res, err, c.status)
		}
		// A redelivery repeats the recorded answer.
		again, err := d.Dispatch(ctx, c.cmd)
		if err != nil || again.Status != c.status || !again.Duplicate || again.Reason != res.Reason || again.Version != res.Version {
			t.Errorf("%s redelivered: %+v, %v; want the recorded %+v", c.name, again, err, res)
		}
	}
	for name, cmd := range map[string]commands.Command{
		"empty title":   rigs.TodoCmd(t, todo.UpdateTodo, "t1", todo.TodoData{Title: " "}, nil),
		"unknown field": {ID: "01JAAAAAAAAAAAAAAAAAAAAAAA", Type: todo.UpdateTodo, AggregateType: todo.AggregateType, AggregateID: "t1", Payload: json.RawMessage(`{"title":"a","bogus":1}`)},
		"reserved char": rigs.TodoCmd(t, todo.CreateTodo, "a#b", todo.TodoData{Title: "x"}, nil),
		"unknown type":  {ID: "01JAAAAAAAAAAAAAAAAAAAAAAB", Type: "Frobnicate", AggregateType: todo.AggregateType, AggregateID: "t1", Payload: json.RawMessage(`{}`)},
		"long title":    rigs.TodoCmd(t, todo.UpdateTodo, "t1", todo.TodoData{Title: strings.Repeat("x", 5000)}, nil),
		"oversize item": mustCmd(t, order.PlaceOrder, order.AggregateType, "o1", order.OrderPlacedData{Customer: strings.Repeat("x", 450_000), Total: 1}),
	} {
		res, err := d.Dispatch(ctx, cmd)
		var inv *commands.InvalidError
		if !errors.As(err, &inv) || res.Status != commands.StatusInvalid {
			t.Errorf("%s: %+v, %v; want an InvalidError", name, res, err)
		}
	}
	upd := rigs.TodoCmd(t, todo.UpdateTodo, "t1", todo.TodoData{Title: "write more tests", Completed: true}, rigs.Ver(1))
	if res, err := d.Dispatch(ctx, upd); err != nil || res.Status != commands.StatusAccepted || res.Version != 2 {
		t.Fatalf("update: %+v, %v", res, err)
	}
	if evs := rigs.Events(t, svc, todo.AggregateType, "t1"); len(evs) != 2 || evs[0].EventType != todo.TodoCreated || evs[1].EventType != todo.TodoUpdated ||
		evs[1].Metadata.CausationID != upd.ID {
		t.Fatalf("stored events %v", evs)
	}
	if pks := partitions(t, svc.Endpoints()); len(pks) != 1 || pks[0] != "AGGREGATE#todo#t1" {
		t.Fatalf("refused commands stored partitions %v", pks)
	}
}

// TestBusCommandsDuplicatesAndPoison publishes commands onto Kafka for the
// running handlers: a command published twice appends once, and malformed,
// unknown, reserved-character and oversize commands land on the poison
// topic with a reason while the handler keeps going.
func TestBusCommandsDuplicatesAndPoison(t *testing.T) {
	ep := rigs.Endpoints(t)
	group := testenv.UniqueName(t, "g")
	svc := rigs.NewService(t, ep, group)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- svc.RunCommandHandlers(ctx) }()
	defer func() { cancel(); <-done }()

	pub, sender, topics := rigs.BusClients(t, ep)
	topic := topics.Commands(todo.AggregateType)

	// Poison first, so the valid commands after them prove the handler
	// kept going.
	id := testenv.UniqueName(t, "todo")
	raw := func(uuid, body string) *message.Message {
		m := message.NewMessage(uuid, []byte(body))
		m.Metadata.Set(bus.MetadataPartitionKey, id)
		return m
	}
	bad := map[string]*message.Message{}
	bad["malformed"] = raw("bad-json", `{"id":`)
	unknown := rigs.TodoCmd(t, "Frobnicate", id, struct{}{}, nil)
	bad["unknown"], _ = unknown.ToMessage()
	reserved := rigs.TodoCmd(t, todo.CreateTodo, id, todo.TodoData{Title: "x"}, nil)
	reserved.AggregateID = "a#b"
	body, _ := json.Marshal(reserved)
	bad["reserved"] = raw(reserved.ID, string(body))
	big, _ := commands.NewJSON(order.PlaceOrder, order.AggregateType, id, order.OrderPlacedData{Customer: strings.Repeat("x", 450_000), Total: 5})
	bad["oversize"], _ = big.ToMessage()
	for name, m := range bad {
		topic := topic
		if name == "oversize" {
			topic = topics.Commands(order.AggregateType)
		}
		if err := pub.Publish(topic, m); err != nil {
			t.Fatalf("publish %s: %v", name, err)
		}
	}
	create := rigs.TodoCmd(t, todo.CreateTodo, id, todo.TodoData{Title: "once"}, nil)
	msg, _ := create.ToMessage()
	msg2, _ := create.ToMessage()
	if err := pub.Publish(topic, msg, msg2); err != nil {
		t.Fatal(err)
	}
	waitCtx, waitCancel := context.WithTimeout(ctx, integration.HangAfter())
	defer waitCancel()
	res, err := sender.SendAndWait(waitCtx, rigs.TodoCmd(t, todo.UpdateTodo, id, todo.TodoData{Title: "after"}, rigs.Ver(1)))
	if err != nil || res.Status != commands.StatusAccepted || res.Version != 2 {
		t.Fatalf("update after the poison and the duplicate: %+v, %v", res, err)
	}
	if evs := rigs.Events(t, svc, todo.AggregateType, id); len(evs) != 2 {
		t.Fatalf("stored %d events for %s, want 2 (create once, update once): %v", len(evs), id, evs)
	}
	if pks := partitions(t, ep); len(pks) != 1 || pks[0] != "AGGREGATE#todo#"+id {
		t.Fatalf("table holds partitions %v, want only the todo's", pks)
	}

	poisoned := testenv.Consume(t, ep.KafkaBrokers, group+"-audit", topics.Poison(group), len(bad))
	reasons := map[string]string{}
	for _, p := range poisoned {
		reasons[p.UUID] = p.Metadata.Get(bus.ReasonMetadataKey)
	}
	for name, want := range map[string]string{"malformed": "malformed", "unknown": "unknown command type", "reserved": "reserved character", "oversize": "too large"} {
		if r := reasons[bad[name].UUID]; !strings.Contains(r, want) {
			t.Errorf("%s: poison reason %q does not say %q", name, r, want)
		}
	}
}
