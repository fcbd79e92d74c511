package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/bus/kafka/kafkatest"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/privacy"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
	"github.com/eventpipe/eventpipe/projections/readmodels"
	"github.com/eventpipe/eventpipe/projections/searchmodels"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// lockedBuffer is a log sink many goroutines write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// indicesDump is every document of every index whose name begins with
// prefix, as the search answers it.
func indicesDump(t *testing.T, es *esclient.Client, prefix string) string {
	t.Helper()
	ctx := context.Background()
	pattern := strings.ToLower(prefix) + "*"
	if err := esclient.Do(ctx, es, esapi.IndicesRefreshRequest{Index: []string{pattern}}, nil); err != nil {
		t.Fatal(err)
	}
	var res json.RawMessage
	body := `{"size":10000,"version":true,"query":{"match_all":{}}}`
	if err := esclient.Do(ctx, es, esapi.SearchRequest{Index: []string{pattern}, Body: strings.NewReader(body)}, &res); err != nil {
		t.Fatal(err)
	}
	return string(res)
}

// pipelineSubject is one data subject's personal values, as the test
// writes them: a todo it owns, a bank account that is its own, and its
// analytics session as a signed-in user.
type pipelineSubject struct{ id, name string }

func (s pipelineSubject) title() string     { return s.name + "'s todo about the garden" }
func (s pipelineSubject) message() string   { return s.name + "'s gate code 4711" }
func (s pipelineSubject) first() string     { return s.name + "ella" }
func (s pipelineSubject) last() string      { return s.name + "sdottir" }
func (s pipelineSubject) desc(k int) string { return fmt.Sprintf("%s's rent %d", s.name, k) }
func (s pipelineSubject) url(k int) string {
	return fmt.Sprintf("https://shop.example/%s-basket-%d", s.name, k)
}
func (s pipelineSubject) referrer() string { return "https://mail.example/" + s.name + "-inbox" }
func (s pipelineSubject) agent() string    { return s.name + "-browser/1.0" }
func (s pipelineSubject) email() string    { return s.name + "@mail.example" }
func (s pipelineSubject) session() string  { return "sess-" + s.id }
func (s pipelineSubject) todoID() string   { return "t-" + s.id }
func (s pipelineSubject) values() []string {
	out := []string{s.title(), s.message(), s.first(), s.last(), s.referrer(), s.agent(), s.email()}
	for k := 1; k <= 4; k++ {
		out = append(out, s.desc(k))
	}
	for k := 1; k <= 3; k++ {
		out = append(out, s.url(k))
	}
	return out
}

// TestForgettingASubjectLeavesNoneOfItsValuesAnywhere is issue 41's
// acceptance on the stack: three subjects' personal data in todos, bank
// accounts and analytics go through the sealing sender, the command
// handlers, both relays and every consumer of the built-in catalogue
// (read models, the search model, snapshots, the analytics aggregation,
// the sagas), and a replay; then one subject is forgotten. A scan of
// every DynamoDB table, every record of every Kafka topic the test used,
// every row of the Postgres schema, every document of every search index
// and the processes' logs hold none of its values, byte for byte, while
// the other two subjects' are there and readable; a replay of each read
// and search model after the forget gives the same scrubbed rows; and
// commands and analytics events for the forgotten subject are refused.
func TestForgettingASubjectLeavesNoneOfItsValuesAnywhere(t *testing.T) {
	t.Parallel() // slow, and independent: tables, topics and groups of its own
	ctx := context.Background()
	ep := integration.Isolate(t)
	var logs lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	proc := eventpipe.Process{Endpoints: ep, Logger: logger}
	if _, err := eventpipe.Migrate(ctx, eventpipe.MigrateConfig{Process: proc}); err != nil {
		t.Fatal(err)
	}
	key := []byte(strings.Repeat("p", commands.MinKeyLength))
	svc, err := eventpipe.NewWriteSide(ctx, eventpipe.WriteSideConfig{Process: proc, ConsumerGroup: integration.UniqueName(t, "g"),
		NoAuth: true, ProducerKeys: commands.Keys{"producer-1": key}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	sender, err := eventpipe.NewSender(eventpipe.SenderConfig{Process: eventpipe.Process{Endpoints: ep, Catalog: eventpipe.Builtin(), Logger: logger},
		Signer: commands.Signer{KeyID: "producer-1", Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sender.Close() })
	site, err := eventpipe.OpenAnalytics(ctx, ep, logger)
	if err != nil {
		t.Fatal(err)
	}
	var running []*rigs.Background
	check := func() {
		t.Helper()
		for _, b := range running {
			b.Check(t)
		}
	}
	running = append(running, rigs.GoRun(t, "command handlers", svc.RunCommandHandlers))
	for _, stream := range eventpipe.RelayStreams() {
		rel, err := eventpipe.NewRelay(ctx, eventpipe.RelayConfig{Process: proc, Stream: stream, DiscoveryInterval: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rel.Close() })
		running = append(running, rigs.GoRun(t, "relay "+stream, rel.Run))
	}
	names := eventpipe.ConsumerNames(eventpipe.Builtin())
	cons, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Process: proc, Names: names, SnapshotEvery: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cons.Close() })
	running = append(running, rigs.GoRun(t, "consumers "+strings.Join(names, ","), cons.Run))

	ann, bob, cid := pipelineSubject{"ann", "Annika"}, pipelineSubject{"bob", "Bobbert"}, pipelineSubject{"cid", "Cidney"}
	subjects := []pipelineSubject{ann, bob, cid}
	send := func(typ, aggType, id, actor string, payload any) {
		t.Helper()
		check()
		cmd := mustCmd(t, typ, aggType, id, payload)
		cmd.Actor = actor
		if res, err := sender.SendAndWait(ctx, cmd); err != nil || res.Status != commands.StatusAccepted {
			t.Fatalf("%s %s/%s: %+v, %v", typ, aggType, id, res, err)
		}
	}
	start := time.Now().UTC().Add(-time.Minute)
	for _, s := range subjects {
		send(todo.CreateTodo, todo.AggregateType, s.todoID(), s.id, todo.TodoData{Title: s.title(), Message: s.message()})
		send(bankaccount.OpenAccount, bankaccount.AggregateType, s.id, "ops", struct{}{})
		send(bankaccount.RenameOwner, bankaccount.AggregateType, s.id, "ops", bankaccount.OwnerRenamedData{OwnerFirst: s.first(), OwnerLast: s.last()})
		for k := 1; k <= 4; k++ {
			send(bankaccount.RecordTransaction, bankaccount.AggregateType, s.id, "ops", bankaccount.TransactionAcceptedData{Desc: s.desc(k), Amount: 100})
		}
		var batch []analytics.EventInput
		for k := 1; k <= 3; k++ {
			at := start.Add(time.Duration(k) * time.Second)
			batch = append(batch, analytics.EventInput{Type: "page_view", SessionID: s.session(), UserID: s.id, URL: s.url(k),
				Referrer: s.referrer(), UserAgent: s.agent(), Properties: map[string]any{"email": s.email()}, CreatedAt: &at})
		}
		if _, err := site.Ingest(ctx, "shop", batch); err != nil {
			t.Fatal(err)
		}
	}

	db, err := pgxpool.New(ctx, ep.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	es := testenv.Elasticsearch(t)
	models := func() string { return schemaDump(t, db) + indicesDump(t, es, ep.TopicPrefix) }
	integration.Await(t, "every subject's data through every consumer", func() error {
		check()
		dump := models()
		for _, s := range subjects {
			for _, v := range []string{s.title(), s.message(), s.first(), s.last(), s.desc(4)} {
				if !strings.Contains(dump, v) {
					return fmt.Errorf("the read and search models lack %q", v)
				}
			}
			snap, err := svc.Store.Snapshot(ctx, eventstore.Ref{Type: bankaccount.AggregateType, ID: s.id})
			if err != nil || snap.Seq < 5 {
				return fmt.Errorf("snapshot of account %s: %+v, %v", s.id, snap.Seq, err)
			}
			sess, ok, err := site.Session(ctx, "shop", s.session())
			if err != nil || !ok || sess.EventCount != 3 {
				return fmt.Errorf("session of %s: %+v, %v, %v", s.id, sess, ok, err)
			}
			if sess.EntryURL != s.url(1) || sess.ExitURL != s.url(3) {
				return fmt.Errorf("session of %s reads entry %q exit %q", s.id, sess.EntryURL, sess.ExitURL)
			}
		}
		return nil
	})
	replay := func(model string) {
		t.Helper()
		if _, err := operator.Replay(ctx, operator.ReplayConfig{Process: proc, ReadModel: model}); err != nil {
			t.Fatalf("replay %s: %v", model, err)
		}
	}
	replay(readmodels.Todos{}.Name())

	res, err := operator.Forget(ctx, operator.ForgetConfig{Process: proc, Subject: ann.id, Actor: "dpo", Reason: "erasure request"})
	if err != nil || res.Fact.Erased != 3 {
		t.Fatalf("forget %s: %+v, %v; want its todo's, its account's and its analytics keys erased", ann.id, res, err)
	}
	integration.Await(t, "the forgotten subject scrubbed from the read and search models", func() error {
		check()
		dump := models()
		for _, v := range ann.values() {
			if strings.Contains(dump, v) {
				return fmt.Errorf("the read and search models still hold %q", v)
			}
		}
		return nil
	})

	// A replay of each model after the forget rebuilds what the scrub
	// left.
	modelTables := []string{"todos", "accounts", "account_transactions"}
	searchAlias := strings.ToLower(ep.TopicPrefix + searchmodels.TodoSearch{}.Name())
	scrubbed := tableRows(t, db, modelTables...)
	scrubbedDocs := testenv.SearchDocuments(t, es, searchAlias)
	for _, m := range []string{readmodels.Todos{}.Name(), readmodels.Accounts{}.Name(), searchmodels.TodoSearch{}.Name()} {
		replay(m)
	}
	if again := tableRows(t, db, modelTables...); again != scrubbed {
		t.Errorf("the read models after a replay:\n%s\nafter the scrub:\n%s", again, scrubbed)
	}
	if again := testenv.SearchDocuments(t, es, searchAlias); fmt.Sprint(again) != fmt.Sprint(scrubbedDocs) {
		t.Errorf("the search documents after a replay: %v\nafter the scrub: %v", again, scrubbedDocs)
	}

	// Commands and analytics events for the forgotten subject are refused.
	dispatch := func(typ, aggType, id string, payload any) commands.Result {
		t.Helper()
		cmd := mustCmd(t, typ, aggType, id, payload)
		cmd.Actor, cmd.ActorSource = ann.id, eventstore.ActorHTTP
		res, err := svc.Dispatcher.Dispatch(ctx, cmd)
		if err != nil {
			t.Fatalf("%s %s/%s: %v", typ, aggType, id, err)
		}
		return res
	}
	for _, res := range []commands.Result{
		dispatch(todo.UpdateTodo, todo.AggregateType, ann.todoID(), todo.TodoData{Title: "again"}),
		dispatch(bankaccount.RecordTransaction, bankaccount.AggregateType, ann.id, bankaccount.TransactionAcceptedData{Desc: "again", Amount: 1}),
	} {
		if res.Status != commands.StatusRejected || res.Code != privacy.CodeForgotten {
			t.Errorf("a command on the forgotten subject's %s/%s: %+v, want rejected with %s", res.AggregateType, res.AggregateID, res, privacy.CodeForgotten)
		}
	}
	// The sender still holds the todo's key in its cache (for up to its
	// CacheTTL): it may seal and send, and the handlers then refuse at
	// the append's key check.
	later := mustCmd(t, todo.UpdateTodo, todo.AggregateType, ann.todoID(), todo.TodoData{Title: "again"})
	if res, err := sender.SendAndWait(ctx, later); !errors.Is(err, privacy.ErrForgotten) && (err != nil || res.Code != privacy.CodeForgotten) {
		t.Errorf("sending for the forgotten subject: %+v, %v; want privacy.ErrForgotten or a rejection with %s", res, err, privacy.CodeForgotten)
	}
	// A process that never held the subject's key: the analytics API's.
	fresh, err := eventpipe.OpenAnalytics(ctx, ep, logger)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.Ingest(ctx, "shop", []analytics.EventInput{{Type: "page_view", SessionID: "sess-ann-2", UserID: ann.id, URL: "https://shop.example/again"}}); !errors.Is(err, privacy.ErrForgotten) {
		t.Errorf("analytics of the forgotten subject: %v, want privacy.ErrForgotten", err)
	}

	// Byte for byte, everywhere the pipeline wrote.
	ddb := testenv.DynamoDB(t)
	places := map[string]string{
		"the Postgres schema": schemaDump(t, db),
		"the search indices":  indicesDump(t, es, ep.TopicPrefix),
		"the Kafka topics":    kafkatest.TopicsDump(t, ep.KafkaBrokers, ep.TopicPrefix),
		"the processes' logs": logs.String(),
		"the events table":    testenv.TableDump(t, ddb, ep.EventsTable),
		"the analytics table": testenv.TableDump(t, ddb, ep.AnalyticsTable),
		"the keys table":      testenv.TableDump(t, ddb, ep.KeysTable),
		"the leases table":    testenv.TableDump(t, ddb, ep.LeasesTable),
	}
	if !strings.Contains(places["the processes' logs"], `"msg":"relay started"`) {
		t.Fatal("the processes' logs were not captured")
	}
	if !strings.Contains(places["the Kafka topics"], privacy.SealedPrefix) || !strings.Contains(places["the analytics table"], privacy.SealedPrefix) {
		t.Fatal("nothing sealed on the topics or in the analytics table: the dumps read nothing")
	}
	for _, where := range slices.Sorted(maps.Keys(places)) {
		for _, v := range ann.values() {
			if strings.Contains(places[where], v) {
				t.Errorf("%s holds the forgotten subject's %q", where, v)
			}
		}
	}
	for _, s := range []pipelineSubject{bob, cid} {
		for _, v := range []string{s.title(), s.message(), s.first(), s.last(), s.desc(1), s.desc(4)} {
			if !strings.Contains(places["the Postgres schema"], v) {
				t.Errorf("the read models lost %s's %q", s.id, v)
			}
		}
		events, err := svc.Store.Load(ctx, eventstore.Ref{Type: todo.AggregateType, ID: s.todoID()}, 0)
		if err != nil || len(events) != 1 || !strings.Contains(string(events[0].Payload), s.title()) {
			t.Errorf("%s's todo reads %v, %v", s.id, events, err)
		}
		evs, err := site.SessionEvents(ctx, "shop", s.session())
		if err != nil || len(evs) != 3 || evs[0].URL != s.url(1) || evs[0].Properties["email"] != s.email() {
			t.Errorf("%s's analytics read %+v, %v", s.id, evs, err)
		}
	}
	// The export of a kept subject holds every value written for it, its
	// analytics included, and none of the others'.
	export, err := operator.ExportSubject(ctx, operator.ExportConfig{Process: proc, Subject: bob.id, Actor: "dpo"})
	if err != nil {
		t.Fatal(err)
	}
	whole := mustJSON(t, export)
	for _, v := range bob.values() {
		if !strings.Contains(whole, v) {
			t.Errorf("the export of %s lacks %q", bob.id, v)
		}
	}
	for _, v := range append(ann.values(), cid.values()...) {
		if strings.Contains(whole, v) {
			t.Errorf("the export of %s holds another subject's %q", bob.id, v)
		}
	}
	if len(export.Analytics.Sessions) != 1 || len(export.Analytics.Events["shop/"+bob.session()]) != 3 {
		t.Errorf("the export of %s holds analytics %+v", bob.id, export.Analytics)
	}
	evs, err := fresh.SessionEvents(ctx, "shop", ann.session())
	if err != nil || len(evs) != 3 || evs[0].URL != privacy.ForgottenText {
		t.Errorf("the forgotten subject's analytics read %+v, %v; want them forgotten", evs, err)
	}
}
