package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	ddbstore "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/projections/rollups"
	"github.com/eventpipe/eventpipe/rollup"
)

// scenario sends the demo's commands and keeps what they imply.
type scenario struct {
	cfg     Config
	catalog *eventpipe.Catalog
	sender  *kafka.Sender
	store   *ddbstore.Store
	db      *pgxpool.Pool
	http    *http.Client

	touched           []eventstore.Ref
	balances          map[string]int64 // account id → balance the accepted transactions imply
	orders            map[string]orderRow
	todos             map[string]*todoRow // nil: deleted
	customer          string              // of every order of this run
	accepted, refused int

	// The hourly order roll-up is global: rollupBase holds its buckets
	// from the hour of rollupFrom (when the orders chapter began) before
	// this run's orders; rollupWant what their accepted commands add.
	rollupFrom time.Time
	rollupBase map[string]rollup.Measures
	rollupWant rollup.Measures
}

type orderRow struct {
	Status                order.Status
	Total, Paid, Refunded int64
}

type todoRow struct{ Title, Message string }

func newScenario(ctx context.Context, cfg Config) (*scenario, error) {
	catalog := eventpipe.Builtin()
	// Where the command handlers require signed commands, the story's
	// are signed with the producer key of the environment (`send`'s).
	signer, err := eventpipe.SignerFromEnv()
	if err != nil {
		return nil, err
	}
	sender, err := eventpipe.NewSender(eventpipe.SenderConfig{Process: eventpipe.Process{Endpoints: cfg.Endpoints, Catalog: catalog}, Signer: signer})
	if err != nil {
		return nil, err
	}
	store, err := eventpipe.OpenStore(ctx, cfg.Endpoints, catalog, slog.New(slog.DiscardHandler))
	if err != nil {
		sender.Close()
		return nil, err
	}
	db, err := eventpipe.OpenPostgres(ctx, cfg.Endpoints)
	if err != nil {
		sender.Close()
		return nil, fmt.Errorf("demo: read models: %w", err)
	}
	return &scenario{cfg: cfg, catalog: catalog, sender: sender, store: store, db: db, http: apiClient(cfg),
		balances: map[string]int64{}, orders: map[string]orderRow{}, todos: map[string]*todoRow{}, rollupWant: rollup.Measures{}}, nil
}

func (s *scenario) close() {
	_ = s.sender.Close()
	s.db.Close()
}

func (s *scenario) id(name string) string { return name + "-" + s.cfg.RunID }

// step is one command of the story and the answer the story needs.
type step struct {
	typ, id string
	payload any
	want    commands.Status
}

// send sends one command through the bus, waits for its answer, prints
// both, and fails the demo when the answer is not the one the story
// needs.
func (s *scenario) send(ctx context.Context, n *narrator, st step) (commands.Result, error) {
	typ, id, payload := st.typ, st.id, st.payload
	body, err := json.Marshal(payload)
	if err != nil {
		return commands.Result{}, err
	}
	cmd, err := s.catalog.NewCommand(typ, id, body)
	if err != nil {
		return commands.Result{}, err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := s.sender.SendAndWait(waitCtx, cmd)
	if err != nil {
		return res, fmt.Errorf("demo: %s %s: %w", typ, id, err)
	}
	ref := eventstore.Ref{Type: cmd.AggregateType, ID: id}
	if !slices.Contains(s.touched, ref) {
		s.touched = append(s.touched, ref)
	}
	answer := fmt.Sprintf("accepted, version %d", res.Version)
	if res.Status == commands.StatusAccepted {
		s.accepted++
	} else {
		s.refused++
		answer = fmt.Sprintf("%s: %s", res.Status, res.Reason)
	}
	n.line("%-18s %-16s %-44s → %s", typ, id, string(body), answer)
	if res.Status != st.want {
		return res, fmt.Errorf("demo: command %s answered %s (%s), the story expects %s", res.CommandID, res.Status, res.Reason, st.want)
	}
	return res, nil
}

func (s *scenario) accountsChapter(ctx context.Context, n *narrator) error {
	n.chapter("Bank accounts, through the bus (overdraft limit -1000)")
	alice, bob, carol := s.id("alice"), s.id("bob"), s.id("carol")
	steps := []step{
		{bankaccount.OpenAccount, alice, struct{}{}, commands.StatusAccepted},
		{bankaccount.OpenAccount, bob, struct{}{}, commands.StatusAccepted},
		{bankaccount.OpenAccount, carol, struct{}{}, commands.StatusAccepted},
		{bankaccount.RenameOwner, alice, bankaccount.OwnerRenamedData{OwnerFirst: "Alice", OwnerLast: "Smith"}, commands.StatusAccepted},
		{bankaccount.RecordTransaction, alice, bankaccount.TransactionAcceptedData{Desc: "salary", Amount: 500}, commands.StatusAccepted},
		{bankaccount.RecordTransaction, bob, bankaccount.TransactionAcceptedData{Desc: "gift", Amount: 200}, commands.StatusAccepted},
		{bankaccount.RecordTransaction, alice, bankaccount.TransactionAcceptedData{Desc: "groceries", Amount: -120}, commands.StatusAccepted},
		{bankaccount.RecordTransaction, bob, bankaccount.TransactionAcceptedData{Desc: "laptop", Amount: -900}, commands.StatusAccepted},
		{bankaccount.RecordTransaction, bob, bankaccount.TransactionAcceptedData{Desc: "rent", Amount: -400}, commands.StatusRejected},
		{bankaccount.RecordTransaction, carol, bankaccount.TransactionAcceptedData{Desc: "coffee", Amount: -50}, commands.StatusAccepted},
		{bankaccount.RecordTransaction, carol, bankaccount.TransactionAcceptedData{Desc: "car", Amount: -2000}, commands.StatusRejected},
		{bankaccount.RecordTransaction, s.id("dave"), bankaccount.TransactionAcceptedData{Desc: "ghost", Amount: 10}, commands.StatusNotFound},
	}
	for _, st := range steps {
		res, err := s.send(ctx, n, st)
		if err != nil {
			return err
		}
		if st.typ == bankaccount.OpenAccount {
			s.balances[st.id] = 0
		}
		if tx, ok := st.payload.(bankaccount.TransactionAcceptedData); ok && res.Status == commands.StatusAccepted {
			s.balances[st.id] += tx.Amount
		}
	}
	n.line("bob's rent would take him to -1100 and carol's car to -2050: both refused, nothing stored;")
	n.line("carol's coffee takes her below 0, which publishes an accountOverdrawn outbound event")
	return nil
}

func (s *scenario) ordersChapter(ctx context.Context, n *narrator) error {
	n.chapter("Orders through their lifecycle (one refunded)")
	s.customer = s.id("ada")
	o1, o2, o3 := s.id("order-1"), s.id("order-2"), s.id("order-3")
	steps := []step{
		{order.PlaceOrder, o1, order.OrderPlacedData{Customer: s.customer, Total: 4500}, commands.StatusAccepted},
		{order.ProcessPayment, o1, order.PaymentProcessedData{Amount: 4500}, commands.StatusAccepted},
		{order.ShipOrder, o1, order.OrderShippedData{TrackingNumber: "TRK-1"}, commands.StatusAccepted},
		{order.DeliverOrder, o1, struct{}{}, commands.StatusAccepted},
		{order.PlaceOrder, o2, order.OrderPlacedData{Customer: s.customer, Total: 1200}, commands.StatusAccepted},
		{order.ShipOrder, o2, order.OrderShippedData{TrackingNumber: "TRK-2"}, commands.StatusRejected},
		{order.ProcessPayment, o2, order.PaymentProcessedData{Amount: 1200}, commands.StatusAccepted},
		{order.RefundOrder, o2, order.OrderRefundedData{Amount: 1200, Reason: "out of stock"}, commands.StatusAccepted},
		{order.PlaceOrder, o3, order.OrderPlacedData{Customer: s.customer, Total: 300}, commands.StatusAccepted},
		{order.ProcessPayment, o3, order.PaymentProcessedData{Amount: 250}, commands.StatusRejected},
	}
	s.rollupFrom = time.Now()
	var err error
	if s.rollupBase, err = s.orderRollup(ctx, s.rollupFrom, s.rollupFrom); err != nil {
		return err
	}
	for _, st := range steps {
		res, err := s.send(ctx, n, st)
		if err != nil {
			return err
		}
		if res.Status == commands.StatusAccepted {
			s.rollupWant.Add(orderRollupMeasures(st.payload))
		}
	}
	s.orders[o1] = orderRow{Status: order.StatusDelivered, Total: 4500, Paid: 4500}
	s.orders[o2] = orderRow{Status: order.StatusRefunded, Total: 1200, Paid: 1200, Refunded: 1200}
	s.orders[o3] = orderRow{Status: order.StatusPlaced, Total: 300}
	n.line("order-2 could not ship before it was paid, order-3's payment did not match its total;")
	n.line("order-2's refund is a compensating event: its payment stays in the log")
	return nil
}

// orderRollupMeasures is what an accepted order command's payload adds
// to the order roll-up (rollups.OrdersDefinition).
func orderRollupMeasures(payload any) rollup.Measures {
	switch d := payload.(type) {
	case order.OrderPlacedData:
		return rollup.Measures{rollups.MeasureOrders: 1, rollups.MeasurePlacedTotal: d.Total}
	case order.PaymentProcessedData:
		return rollup.Measures{rollups.MeasurePayments: 1, rollups.MeasureRevenue: d.Amount}
	case order.OrderRefundedData:
		return rollup.Measures{rollups.MeasureRefunds: 1, rollups.MeasureRefunded: d.Amount}
	}
	return nil
}

// httpCall sends one request to the todo API and prints it with the
// answer's status and ETag.
func (s *scenario) httpCall(ctx context.Context, n *narrator, method, path, ifMatch, body string, want int) (etag string, err error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+s.cfg.Endpoints.HTTPAddr+path, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	shown := method + " " + path
	if ifMatch != "" {
		req.Header.Set("If-Match", ifMatch)
		shown += "  If-Match: " + ifMatch
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("demo: %s: %w", shown, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	n.line("%-40s %s → %d %s, ETag %s", shown, body, resp.StatusCode, http.StatusText(resp.StatusCode), resp.Header.Get("ETag"))
	if resp.StatusCode != want {
		return "", fmt.Errorf("demo: %s answered %d (%s), the story expects %d", shown, resp.StatusCode, strings.TrimSpace(string(answer)), want)
	}
	return resp.Header.Get("ETag"), nil
}

func (s *scenario) todosChapter(ctx context.Context, n *narrator) error {
	n.chapter("Todos, through the HTTP API with ETags (in-process dispatch, same handlers)")
	coffee, milk := s.id("coffee"), s.id("milk")
	etag, err := s.httpCall(ctx, n, "POST", "/todo", "", `{"id":"`+coffee+`","title":"TODO","message":"Make coffee"}`, http.StatusCreated)
	if err != nil {
		return err
	}
	milkTag, err := s.httpCall(ctx, n, "POST", "/todo", "", `{"id":"`+milk+`","title":"Buy milk","message":"oat"}`, http.StatusCreated)
	if err != nil {
		return err
	}
	if _, err := s.httpCall(ctx, n, "POST", "/todo/"+coffee, etag, `{"title":"TODO","message":"Make 2 coffees"}`, http.StatusOK); err != nil {
		return err
	}
	if _, err := s.httpCall(ctx, n, "POST", "/todo/"+coffee, etag, `{"title":"TODO","message":"Make 3 coffees"}`, http.StatusConflict); err != nil {
		return err
	}
	if _, err := s.httpCall(ctx, n, "DELETE", "/todo/"+milk, milkTag, "", http.StatusNoContent); err != nil {
		return err
	}
	s.touched = append(s.touched, eventstore.Ref{Type: todo.AggregateType, ID: coffee}, eventstore.Ref{Type: todo.AggregateType, ID: milk})
	s.todos[coffee] = &todoRow{Title: "TODO", Message: "Make 2 coffees"}
	s.todos[milk] = nil
	n.line("the second update still said If-Match %s after the first had moved the todo on: 409, nothing stored", etag)
	return nil
}

func (s *scenario) appended(ctx context.Context, n *narrator) error {
	n.chapter("What the event store holds")
	byType := map[string]int64{}
	var total int64
	for _, ref := range s.touched {
		v, err := s.store.Version(ctx, ref)
		if err != nil && !strings.Contains(err.Error(), eventstore.ErrAggregateNotFound.Error()) {
			return err
		}
		byType[ref.Type] += v
		total += v
	}
	n.line("%d commands accepted, %d refused; %d events appended: %d bankaccount, %d order, %d todo",
		s.accepted, s.refused, total, byType[bankaccount.AggregateType], byType[order.AggregateType], byType[todo.AggregateType])
	n.line("each in one DynamoDB transaction with its aggregate's version, STATE, outbox and command record")
	return nil
}

// readModels waits until the consumers' lag is zero and every read model
// holds what the commands imply, printing the lag as it falls, then
// prints the read models.
func (s *scenario) readModels(ctx context.Context, n *narrator) error {
	n.chapter("The relay and the read models")
	deadline := time.Now().Add(s.cfg.Timeout)
	lastLag := -1.0
	for {
		lag, lagErr := scrapeSum(ctx, s.http, "http://"+s.cfg.ConsumeMetricsAddr+"/metrics", kafka.LagMetricName, nil)
		if lagErr == nil && lag != lastLag {
			n.line("consumer lag: %.0f messages", lag)
			lastLag = lag
		}
		mismatch, err := s.compare(ctx)
		if err != nil {
			return err
		}
		if mismatch == "" && lag == 0 && lagErr == nil {
			break
		}
		if time.Now().After(deadline) {
			if mismatch == "" {
				mismatch = fmt.Sprintf("consumer lag %.0f (%v)", lag, lagErr)
			}
			return fmt.Errorf("demo: after %s the read models still differ from the commands: %s", s.cfg.Timeout, mismatch)
		}
		time.Sleep(500 * time.Millisecond)
	}
	published, err := scrapeSum(ctx, s.http, "http://"+s.cfg.RelayMetricsAddr+"/metrics", "eventpipe_relay_records_total", map[string]string{"outcome": "published", "stream": "events"})
	if err == nil {
		n.line("the relay published %.0f records (events and outbound events) from the table's stream since it started", published)
	}
	return s.print(ctx, n)
}

// compare returns "" when the read models hold what the commands imply,
// or the first difference.
func (s *scenario) compare(ctx context.Context) (string, error) {
	for id, want := range s.balances {
		var got int64
		err := s.db.QueryRow(ctx, `SELECT balance FROM accounts WHERE account_id = $1`, id).Scan(&got)
		if err == pgx.ErrNoRows {
			return "account " + id + " not there yet", nil
		} else if err != nil {
			return "", fmt.Errorf("demo: accounts read model: %w", err)
		}
		if got != want {
			return fmt.Sprintf("account %s balance %d, want %d", id, got, want), nil
		}
	}
	for id, want := range s.orders {
		var got orderRow
		var status string
		err := s.db.QueryRow(ctx, `SELECT status, total, paid, refunded FROM orders WHERE order_id = $1`, id).Scan(&status, &got.Total, &got.Paid, &got.Refunded)
		if err == pgx.ErrNoRows {
			return "order " + id + " not there yet", nil
		} else if err != nil {
			return "", fmt.Errorf("demo: orders read model: %w", err)
		}
		got.Status = order.Status(status)
		if got != want {
			return fmt.Sprintf("order %s %+v, want %+v", id, got, want), nil
		}
	}
	for id, want := range s.todos {
		var title, message string
		var deleted bool
		err := s.db.QueryRow(ctx, `SELECT title, message, deleted FROM todos WHERE todo_id = $1`, id).Scan(&title, &message, &deleted)
		if err == pgx.ErrNoRows {
			return "todo " + id + " not there yet", nil
		} else if err != nil {
			return "", fmt.Errorf("demo: todos read model: %w", err)
		}
		if want == nil != deleted || (want != nil && (title != want.Title || message != want.Message)) {
			return fmt.Sprintf("todo %s %q %q deleted=%v, want %+v", id, title, message, deleted, want), nil
		}
	}
	return "", nil
}

func (s *scenario) print(ctx context.Context, n *narrator) error {
	n.line("accounts (Postgres, read model accounts):")
	for _, id := range sortedKeys(s.balances) {
		var first, last string
		var balance, version int64
		if err := s.db.QueryRow(ctx, `SELECT owner_first, owner_last, balance, version FROM accounts WHERE account_id = $1`, id).Scan(&first, &last, &balance, &version); err != nil {
			return err
		}
		n.line("  %-16s owner %-12s balance %6d   version %d   (expected %d)", id, strings.TrimSpace(first+" "+last), balance, version, s.balances[id])
	}
	n.line("orders (Postgres, read model orders):")
	for _, id := range sortedKeys(s.orders) {
		var status string
		var total, paid, refunded int64
		if err := s.db.QueryRow(ctx, `SELECT status, total, paid, refunded FROM orders WHERE order_id = $1`, id).Scan(&status, &total, &paid, &refunded); err != nil {
			return err
		}
		n.line("  %-16s %-10s total %5d  paid %5d  refunded %5d   (expected %s)", id, status, total, paid, refunded, s.orders[id].Status)
	}
	n.line("todos (Postgres, read model todos; GET /todo lists them):")
	for _, id := range sortedKeys(s.todos) {
		var title, message string
		var deleted bool
		if err := s.db.QueryRow(ctx, `SELECT title, message, deleted FROM todos WHERE todo_id = $1`, id).Scan(&title, &message, &deleted); err != nil {
			return err
		}
		want := "deleted"
		if w := s.todos[id]; w != nil {
			want = fmt.Sprintf("%q", w.Message)
		}
		if deleted {
			n.line("  %-16s deleted   (expected %s)", id, want)
			continue
		}
		n.line("  %-16s title %q message %q   (expected %s)", id, title, message, want)
	}
	return nil
}

// scrapeSum sums the samples of metric at url whose labels include
// match.
func scrapeSum(ctx context.Context, client *http.Client, url, metric string, match map[string]string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("demo: metrics at %s: %w", url, err)
	}
	mf, ok := families[metric]
	if !ok {
		return 0, fmt.Errorf("demo: no %s at %s yet", metric, url)
	}
	var sum float64
	for _, m := range mf.GetMetric() {
		if !labelsMatch(m, match) {
			continue
		}
		switch {
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		}
	}
	return sum, nil
}

func labelsMatch(m *dto.Metric, match map[string]string) bool {
	for k, v := range match {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k && lp.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
