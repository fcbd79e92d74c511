package demo

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/poison"
)

// The day-two chapter: the demo adds two consumers of its own to the live
// pipeline, as a team that adopts eventpipe would, runs them in this
// process (the pipeline's own consumers run in `consume --all`), and then
// meets what operators meet: a consumer with a bug that poisons messages,
// fixed and redriven with `eventpipe poison redrive`, and a read model
// that refuses an event by design, released with `eventpipe parked skip`.

// Names of the demo's own consumers.
const (
	notifierName = "overdraft-notices"
	ledgerName   = "large_transactions"
)

// largeAmount is the smallest amount, debit or credit, the ledger keeps.
const largeAmount = 1000

//go:embed migrations/*.sql
var ledgerMigrations embed.FS

// largeTransactions is the demo's own Postgres read model: one row per
// bank-account transaction of largeAmount or more, with its description.
// It refuses, by design, a large transaction without a description (a
// permanent *eventstore.ValidationError): the event is parked, and the
// account's later events wait behind it until an operator decides.
type largeTransactions struct{}

func (largeTransactions) Name() string             { return ledgerName }
func (largeTransactions) AggregateTypes() []string { return []string{bankaccount.AggregateType} }
func (largeTransactions) EventTypes() []string     { return []string{bankaccount.TransactionAccepted} }
func (largeTransactions) Tables() []string         { return []string{"large_transactions"} }

// Migrations create its table (eventpipe.Migrate with the demo's
// catalogue).
func (largeTransactions) Migrations() fs.FS {
	sub, err := fs.Sub(ledgerMigrations, "migrations")
	if err != nil {
		panic(err) // the embed pattern guarantees the folder
	}
	return sub
}

// Apply keeps a large transaction's row and refuses one without a
// description.
func (largeTransactions) Apply(_ context.Context, b *pgx.Batch, e eventstore.Envelope) error {
	if e.EventType != bankaccount.TransactionAccepted {
		return nil
	}
	d, err := bankaccount.TransactionAcceptedEvent.Decode(e)
	if err != nil {
		return err
	}
	if d.Amount > -largeAmount && d.Amount < largeAmount {
		return nil
	}
	if strings.TrimSpace(d.Desc) == "" {
		return &eventstore.ValidationError{Field: "desc", Reason: fmt.Sprintf("a transaction of %d or more needs a description for the ledger", largeAmount)}
	}
	b.Queue(`INSERT INTO large_transactions (account_id, seq, amount, description, occurred_at) VALUES ($1, $2, $3, $4, $5)`,
		e.AggregateID, e.Sequence, d.Amount, d.Desc, e.OccurredAt)
	return nil
}

// notifier is the demo's own Watermill handler: it sends (here: keeps) a
// notice for each accountOverdrawn outbound event. Version 1 has a bug:
// it addresses the notice to the owner's name in the accounts read model
// and refuses, permanently, an account without one, so the message goes
// to poison.handler.overdraft-notices. Version 2 writes "Dear customer".
type notifier struct {
	db *pgxpool.Pool
	mu sync.Mutex
	// sent holds the notices sent per account id.
	sent map[string][]string
}

func (nt *notifier) handler(version int) message.NoPublishHandlerFunc {
	return func(msg *message.Message) error {
		var o eventstore.OutboundRecord
		if err := json.Unmarshal(msg.Payload, &o); err != nil {
			return &eventstore.DecodeError{What: "outbound message " + msg.UUID, Reason: err.Error()}
		}
		var d bankaccount.AccountOverdrawnData
		if err := json.Unmarshal(o.Payload, &d); err != nil {
			return &eventstore.DecodeError{What: "accountOverdrawn " + o.ID, Field: "payload", Reason: err.Error()}
		}
		greeting := "Dear customer"
		if version == 1 {
			var first, last string
			err := nt.db.QueryRow(msg.Context(), `SELECT owner_first, owner_last FROM accounts WHERE account_id = $1`, d.AccountID).Scan(&first, &last)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err // transient: retried
			}
			name := strings.TrimSpace(first + " " + last)
			if name == "" {
				return &eventstore.ValidationError{Field: "owner", Reason: fmt.Sprintf("account %s has no owner name to address the notice to", d.AccountID)}
			}
			greeting = "Dear " + name
		}
		nt.mu.Lock()
		nt.sent[d.AccountID] = append(nt.sent[d.AccountID], greeting+", your account "+d.AccountID+" is overdrawn.")
		nt.mu.Unlock()
		return nil
	}
}

func (nt *notifier) notices(account string) []string {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	return append([]string(nil), nt.sent[account]...)
}

// ownCatalog is the built-in catalogue plus the demo's two consumers,
// the notifier at version.
func ownCatalog(nt *notifier, version int) (*eventpipe.Catalog, error) {
	catalog := eventpipe.Builtin()
	if err := catalog.AddReadModel(largeTransactions{}); err != nil {
		return nil, err
	}
	// Open: the outbound payloads of accounts are sealed (docs/privacy.md).
	h, err := eventpipe.Handler(eventpipe.HandlerConfig{Name: notifierName, Topics: []string{bus.OutboundTopic(bankaccount.OutboundAccountOverdrawn)},
		Handler: nt.handler(version), Open: true})
	if err != nil {
		return nil, err
	}
	if err := catalog.AddConsumer(h); err != nil {
		return nil, err
	}
	return catalog, nil
}

// ownConsumers are consumers of the demo's catalogue running in this
// process.
type ownConsumers struct {
	consumers *eventpipe.Consumers
	cancel    context.CancelFunc
	done      chan error
}

// startOwn runs names of catalog in this process, logging to logger. A
// consumer added to a live system starts with what is published from
// then on (bus.StartLatest) the first time its group runs.
func startOwn(ctx context.Context, cfg Config, catalog *eventpipe.Catalog, db *pgxpool.Pool, logger *slog.Logger, names ...string) (*ownConsumers, error) {
	c, err := eventpipe.NewConsumers(ctx, eventpipe.ConsumersConfig{Process: eventpipe.Process{Catalog: catalog, Endpoints: cfg.Endpoints, Logger: logger}, Names: names, DB: db,
		Start: bus.StartLatest})
	if err != nil {
		return nil, fmt.Errorf("demo: consumers %v: %w", names, err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	o := &ownConsumers{consumers: c, cancel: cancel, done: make(chan error, 1)}
	go func() { o.done <- c.Run(runCtx) }()
	return o, nil
}

// failed returns the consumers' error if they stopped.
func (o *ownConsumers) failed() error {
	select {
	case err := <-o.done:
		o.done <- err
		return fmt.Errorf("demo: the demo's own consumers stopped: %v", err)
	default:
		return nil
	}
}

// stop ends the consumers and waits for them.
func (o *ownConsumers) stop() {
	o.cancel()
	err := <-o.done
	o.done <- err
	_ = o.consumers.Close()
}

// dayTwo is what the day-two chapter runs besides the pipeline.
type dayTwo struct {
	cfg      Config
	db       *pgxpool.Pool
	logger   *slog.Logger
	logFile  *os.File
	notifier *notifier
	catalog  *eventpipe.Catalog // with the notifier at version 1
	running  []*ownConsumers
}

func newDayTwo(cfg Config) (*dayTwo, error) {
	f, err := os.Create(filepath.Join(cfg.LogDir, "own-consumers.log"))
	if err != nil {
		return nil, fmt.Errorf("demo: own consumers' log: %w", err)
	}
	nt := &notifier{sent: map[string][]string{}}
	catalog, err := ownCatalog(nt, 1)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &dayTwo{cfg: cfg, logger: slog.New(slog.NewTextHandler(f, nil)), logFile: f, notifier: nt, catalog: catalog}, nil
}

// start runs the ledger and version 1 of the notifier on db.
func (d *dayTwo) start(ctx context.Context, n *narrator, db *pgxpool.Pool) error {
	d.db, d.notifier.db = db, db
	for _, name := range []string{ledgerName, notifierName} {
		o, err := startOwn(ctx, d.cfg, d.catalog, db, d.logger, name)
		if err != nil {
			return err
		}
		d.running = append(d.running, o)
	}
	n.line("%-8s in this process: read model %s and handler %s v1, consumers of the demo's own (log %s)", "demo",
		ledgerName, notifierName, filepath.Join(d.cfg.LogDir, "own-consumers.log"))
	return nil
}

func (d *dayTwo) failed() error {
	for _, o := range d.running {
		if err := o.failed(); err != nil {
			return err
		}
	}
	return nil
}

func (d *dayTwo) stop() {
	for _, o := range d.running {
		o.stop()
	}
	d.running = nil
	_ = d.logFile.Close()
}

// await polls check every 200 ms until it reports done, failing after
// the demo's timeout with the state it last reported, or at once when
// the demo's own consumers stopped.
func (s *scenario) await(ctx context.Context, d *dayTwo, what string, check func() (done bool, state string, err error)) error {
	deadline := time.Now().Add(s.cfg.Timeout)
	for {
		done, state, err := check()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if err := d.failed(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: %s: not after %s: %s", what, s.cfg.Timeout, state)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *scenario) dayTwoChapter(ctx context.Context, n *narrator, d *dayTwo) error {
	n.chapter("Day two: consumers of your own, a bug, a redrive and a skip")
	if err := s.redriveStory(ctx, n, d); err != nil {
		return err
	}
	if err := s.skipStory(ctx, n, d); err != nil {
		return err
	}
	actions, err := operator.OperatorActions(ctx, operator.OperatorActionsConfig{Process: eventpipe.Process{Endpoints: s.cfg.Endpoints, Logger: slog.New(slog.DiscardHandler)}, DB: s.db, Limit: 3})
	if err != nil {
		return err
	}
	n.line("operator actions (eventpipe status, OPERATOR ACTIONS), newest first:")
	for _, a := range actions {
		n.line("  %s  %-6s %-16s %-58s %s", a.At.Format(time.TimeOnly), a.Actor, a.Action, a.Target, a.Result)
	}
	return nil
}

// redriveStory: version 1 of the notifier poisoned bob's and carol's
// overdraft notices (the accounts chapter overdrew them); version 2 is
// deployed in the same group, the two messages are redriven once, each
// notice is sent once, and a second redrive does nothing.
func (s *scenario) redriveStory(ctx context.Context, n *narrator, d *dayTwo) error {
	bob, carol := s.id("bob"), s.id("carol")
	n.line("%s v1 addresses each notice to the owner's name in the accounts read model and refuses an", notifierName)
	n.line("account without one: a bug (bob and carol never gave a name), so their notices went to its poison topic:")
	topic := bus.Topics{Prefix: s.cfg.Endpoints.TopicPrefix}.Poison("handler." + notifierName)
	list := operator.PoisonListConfig{Process: eventpipe.Process{Catalog: d.catalog, Endpoints: s.cfg.Endpoints, Logger: slog.New(slog.DiscardHandler)}, DB: s.db, Topic: topic}
	var mine []operator.PoisonMessage
	err := s.await(ctx, d, "bob's and carol's notices poisoned", func() (bool, string, error) {
		msgs, err := operator.PoisonList(ctx, list)
		if err != nil {
			return false, "", err
		}
		mine = mine[:0]
		for _, m := range msgs {
			if acc := overdrawnAccount(m.Payload); acc == bob || acc == carol {
				mine = append(mine, m)
			}
		}
		return len(mine) == 2, fmt.Sprintf("%d of them on %s", len(mine), topic), nil
	})
	if err != nil {
		return err
	}
	n.line("  $ bin/eventpipe poison list %s", topic)
	positions := make([]operator.PoisonPosition, len(mine))
	offsets := ""
	for i, m := range mine {
		n.line("  %d/%-4d %-20s %s  %s", m.Partition, m.Offset, m.Origin().Topic, m.UUID, m.Reason())
		positions[i] = operator.PoisonPosition{Partition: m.Partition, Offset: m.Offset}
		offsets += fmt.Sprintf(" --offset %d/%d", m.Partition, m.Offset)
	}

	n.line("deploy %s v2 (\"Dear customer\" when there is no name): v1 stops, v2 starts in the same group", notifierName)
	d.running[1].stop()
	fixed, err := ownCatalog(d.notifier, 2)
	if err != nil {
		return err
	}
	v2, err := startOwn(ctx, s.cfg, fixed, s.db, d.logger, notifierName)
	if err != nil {
		return err
	}
	d.running[1] = v2

	reason := notifierName + " v2 needs no owner name"
	redrive := operator.PoisonRedriveConfig{Process: eventpipe.Process{Catalog: fixed, Endpoints: s.cfg.Endpoints, Logger: slog.New(slog.DiscardHandler)}, DB: s.db, Topic: topic, Positions: positions,
		Actor: "demo", Reason: reason}
	n.line("  $ bin/eventpipe poison redrive %s%s --reason %q --actor demo", topic, offsets, reason)
	res, err := operator.PoisonRedrive(ctx, redrive)
	if err != nil {
		return err
	}
	for _, r := range res.Results {
		n.line("  %s: %s to %s", r.Ref, r.Outcome, r.Target)
	}
	if res.Count(poison.Redriven) != 2 {
		return fmt.Errorf("demo: the redrive redrove %d of 2 notices", res.Count(poison.Redriven))
	}
	err = s.await(ctx, d, "the redriven notices sent", func() (bool, string, error) {
		b, c := d.notifier.notices(bob), d.notifier.notices(carol)
		return len(b) == 1 && len(c) == 1, fmt.Sprintf("bob %d, carol %d notices", len(b), len(c)), nil
	})
	if err != nil {
		return err
	}
	for _, acc := range []string{bob, carol} {
		n.line("  sent: %s", d.notifier.notices(acc)[0])
	}
	n.line("  $ bin/eventpipe poison redrive %s%s   (again)", topic, offsets)
	again, err := operator.PoisonRedrive(ctx, redrive)
	if err != nil {
		return err
	}
	for _, r := range again.Results {
		n.line("  %s: %s by %s at %s", r.Ref, r.Outcome, r.By, r.At.Format(time.TimeOnly))
	}
	if again.Count(poison.AlreadyRedriven) != 2 {
		return fmt.Errorf("demo: the second redrive answered %+v, want both already redriven", again.Results)
	}
	n.line("each notice was sent once: the second redrive found both recorded in poison_redrives and published nothing")
	return nil
}

// overdrawnAccount returns the account of an accountOverdrawn outbound
// message's payload (its aggregate: the payload itself is sealed, as it
// is stored), or "".
func overdrawnAccount(payload []byte) string {
	var o eventstore.OutboundRecord
	if json.Unmarshal(payload, &o) != nil || o.Name != bankaccount.OutboundAccountOverdrawn || o.AggregateType != bankaccount.AggregateType {
		return ""
	}
	return o.AggregateID
}

// skipStory: frank's large deposit without a description is parked by
// the ledger, with his next transaction behind it; the operator skips
// it, the one behind applies, and his next transaction flows live.
func (s *scenario) skipStory(ctx context.Context, n *narrator, d *dayTwo) error {
	frank := s.id("frank")
	ref := eventstore.Ref{Type: bankaccount.AggregateType, ID: frank}
	n.line("%s (a read model of the demo's own) keeps transactions of %d or more and refuses, by design, one", ledgerName, largeAmount)
	n.line("without a description:")
	for _, st := range []step{
		{bankaccount.OpenAccount, frank, struct{}{}, commands.StatusAccepted},
		{bankaccount.RecordTransaction, frank, bankaccount.TransactionAcceptedData{Desc: "", Amount: 2500}, commands.StatusAccepted},
		{bankaccount.RecordTransaction, frank, bankaccount.TransactionAcceptedData{Desc: "car loan", Amount: -1200}, commands.StatusAccepted},
	} {
		if _, err := s.send(ctx, n, st); err != nil {
			return err
		}
	}
	s.balances[frank] = 2500 - 1200
	var parked []parkedRow
	err := s.await(ctx, d, "frank's transactions parked", func() (bool, string, error) {
		evs, err := operator.ParkedList(ctx, operator.ParkedListConfig{Process: eventpipe.Process{Catalog: d.catalog, Endpoints: s.cfg.Endpoints, Logger: slog.New(slog.DiscardHandler)}, DB: s.db,
			Projection: ledgerName, Aggregate: ref})
		if err != nil {
			return false, "", err
		}
		parked = parked[:0]
		for _, e := range evs {
			parked = append(parked, parkedRow{seq: e.Envelope.Sequence, typ: e.Envelope.EventType, reason: e.Reason})
		}
		return len(parked) == 2, fmt.Sprintf("%d parked", len(parked)), nil
	})
	if err != nil {
		return err
	}
	n.line("  operator.ParkedList, projection %s, aggregate %s (what `eventpipe parked list` runs, in a", ledgerName, ref)
	n.line("  binary whose catalogue has the read model, as examples/todolog's has its own):")
	for _, p := range parked {
		n.line("  %s  #%d  %-20s %s", ref, p.seq, p.typ, p.reason)
	}
	reason := "reviewed: payroll import without descriptions"
	n.line("  operator.ParkedSkip, reason %q, actor demo (`eventpipe parked skip %s %s`):", reason, ledgerName, ref)
	res, err := operator.ParkedSkip(ctx, operator.ParkedSkipConfig{Process: eventpipe.Process{Catalog: d.catalog, Endpoints: s.cfg.Endpoints, Logger: slog.New(slog.DiscardHandler)}, DB: s.db,
		Projection: ledgerName, Aggregate: ref, Reason: reason, Actor: "demo"})
	if err != nil {
		return err
	}
	n.line("  %s: skipped sequence %d (%s, event %s)", ref, res.Skipped.Envelope.Sequence, res.Skipped.Envelope.EventType, res.Skipped.Envelope.EventID)
	if !res.Reapply.Unparked || res.Reapply.Applied != 1 {
		return fmt.Errorf("demo: the skip left %s parked or applied %d of 1 (%v)", ref, res.Reapply.Applied, res.Reapply.Err)
	}
	n.line("  %s: %d later parked event re-applied, %d applied, unparked", ref, res.Reapply.Reapplied, res.Reapply.Applied)
	if _, err := s.send(ctx, n, step{bankaccount.RecordTransaction, frank, bankaccount.TransactionAcceptedData{Desc: "bonus", Amount: 1000}, commands.StatusAccepted}); err != nil {
		return err
	}
	s.balances[frank] += 1000
	var rows []string
	err = s.await(ctx, d, "frank's bonus in the ledger", func() (bool, string, error) {
		r, err := s.db.Query(ctx, `SELECT seq, amount, description FROM large_transactions WHERE account_id = $1 ORDER BY seq`, frank)
		if err != nil {
			return false, "", err
		}
		rows = rows[:0]
		var seqs []int64
		for r.Next() {
			var seq, amount int64
			var desc string
			if err := r.Scan(&seq, &amount, &desc); err != nil {
				r.Close()
				return false, "", err
			}
			seqs = append(seqs, seq)
			rows = append(rows, fmt.Sprintf("#%d %+d %q", seq, amount, desc))
		}
		if err := r.Err(); err != nil {
			return false, "", err
		}
		return fmt.Sprint(seqs) == "[3 4]", "ledger rows " + strings.Join(rows, ", "), nil
	})
	if err != nil {
		return err
	}
	n.line("the ledger holds frank's %s: the skipped deposit is in skipped_events, the loan applied after the", strings.Join(rows, " and "))
	n.line("skip and the bonus live, as the consumer applies his events again")
	return s.await(ctx, d, "frank's balance in the accounts read model", func() (bool, string, error) {
		mismatch, err := s.compare(ctx)
		return mismatch == "", mismatch, err
	})
}

// parkedRow is a parked event as the story prints it.
type parkedRow struct {
	seq         int64
	typ, reason string
}
