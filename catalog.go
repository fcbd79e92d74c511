package eventpipe

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/bankaccount"
	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/domains/transfer"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/privacy"
	"github.com/eventpipe/eventpipe/privacy/subjects"
	"github.com/eventpipe/eventpipe/projections"
	"github.com/eventpipe/eventpipe/projections/elastic"
	"github.com/eventpipe/eventpipe/projections/readmodels"
	"github.com/eventpipe/eventpipe/projections/rollups"
	"github.com/eventpipe/eventpipe/projections/searchmodels"
	"github.com/eventpipe/eventpipe/sagas"
	"github.com/eventpipe/eventpipe/sagas/transfersaga"
	"github.com/eventpipe/eventpipe/schemas"
)

// Catalog is what a deployment knows, built without I/O: its domains
// (aggregate types, their event and command types, how to build their
// command handlers), its read models, and the one Upcasters registry that
// the store, every facet and the relay read stored events through.
// Register everything at start-up, before the catalogue is handed to a
// constructor; it is read-only afterwards and then safe for concurrent
// use.
type Catalog struct {
	upcasters     eventstore.Upcasters
	domains       map[string]commands.Domain // by aggregate type
	commands      map[string]string          // command type → aggregate type
	readModels    map[string]projections.Projection
	searchModels  map[string]elastic.Projection
	httpResources map[string]HTTPResource
	sagas         map[string]sagas.Definition
	consumers     map[string]Consumer // every kind, by name
}

// HTTPResource mounts a resource's handlers on the write side's HTTP
// server. It runs when the server is built (WriteSide.NewHTTP) and reaches
// the store, the dispatcher and the read-model database through w.
type HTTPResource func(srv *httpapi.Server, w *WriteSide) error

// NewCatalog returns an empty catalogue.
func NewCatalog() *Catalog {
	return &Catalog{domains: map[string]commands.Domain{}, commands: map[string]string{}, readModels: map[string]projections.Projection{},
		searchModels: map[string]elastic.Projection{}, httpResources: map[string]HTTPResource{},
		sagas: map[string]sagas.Definition{}, consumers: map[string]Consumer{}}
}

// Builtin returns a catalogue of the example domains (bank accounts,
// orders, todos, and money transfers between bank accounts) and the data
// subjects' (privacy/subjects: ForgetSubject, SubjectForgotten), the
// Postgres read models of the first three (accounts, orders, todos,
// and order-rollups, the orders per hour and per day), their
// Elasticsearch read models (todos-search, orders-search), the todo and
// order HTTP APIs, the analytics API (package analytics) and the
// money-transfer saga (sagas/transfersaga), the ones the eventpipe binary
// runs, and the analytics aggregation consumer (Aggregator) and the
// snapshot consumer (SnapshotConsumer). Add your own to it, or start
// from NewCatalog.
func Builtin() *Catalog {
	c := NewCatalog()
	for _, d := range []commands.Domain{bankaccount.Domain(), order.Domain(), todo.Domain(), transfer.Domain(), subjects.Domain()} {
		if err := c.AddDomain(d); err != nil {
			panic(fmt.Sprintf("eventpipe: built-in domain: %v", err)) // the built-in set is fixed and tested
		}
	}
	for _, p := range []projections.Projection{readmodels.Accounts{}, readmodels.Orders{}, readmodels.Todos{}, rollups.Orders()} {
		if err := c.AddReadModel(p); err != nil {
			panic(fmt.Sprintf("eventpipe: built-in read model: %v", err))
		}
	}
	for _, p := range []elastic.Projection{searchmodels.TodoSearch{}, searchmodels.OrderSearch{}} {
		if err := c.AddSearchModel(p); err != nil {
			panic(fmt.Sprintf("eventpipe: built-in search model: %v", err))
		}
	}
	if err := c.AddHTTPResource("todo", todoResource); err != nil {
		panic(fmt.Sprintf("eventpipe: built-in HTTP resource: %v", err))
	}
	if err := c.AddHTTPResource("orders", ordersResource); err != nil {
		panic(fmt.Sprintf("eventpipe: built-in HTTP resource: %v", err))
	}
	if err := c.AddHTTPResource("analytics", analyticsResource); err != nil {
		panic(fmt.Sprintf("eventpipe: built-in HTTP resource: %v", err))
	}
	if err := c.AddSaga(transfersaga.New(transfersaga.Config{})); err != nil {
		panic(fmt.Sprintf("eventpipe: built-in saga: %v", err))
	}
	for _, cons := range []Consumer{Aggregator(), SnapshotConsumer(c)} {
		if err := c.AddConsumer(cons); err != nil {
			panic(fmt.Sprintf("eventpipe: built-in consumer: %v", err))
		}
	}
	return c
}

// AddDomain registers d. An aggregate type or a command type that is
// already registered is an error, and so is an invalid d or a declaration
// of personal data its payloads do not fit (schemas.CheckPersonal).
func (c *Catalog) AddDomain(d commands.Domain) error {
	if err := d.Validate(); err != nil {
		return err
	}
	if err := schemas.CheckPersonal(d); err != nil {
		return err
	}
	if _, dup := c.domains[d.AggregateType]; dup {
		return &NameTakenError{Name: d.AggregateType, Kind: "aggregate type", Holder: "aggregate type"}
	}
	for _, t := range d.CommandTypes {
		if other, dup := c.commands[t]; dup {
			return fmt.Errorf("eventpipe: command type %q of %s is already a command of %s", t, d.AggregateType, other)
		}
	}
	c.domains[d.AggregateType] = d
	for _, t := range d.CommandTypes {
		c.commands[t] = d.AggregateType
	}
	return nil
}

// Personal returns its domains' declarations of personal data, by
// aggregate type then event type (commands.Domain.Personal): what a
// privacy.Sealer seals. Empty when no domain declares any.
func (c *Catalog) Personal() map[string]map[string]privacy.Personal {
	out := map[string]map[string]privacy.Personal{}
	for t, d := range c.domains {
		if len(d.Personal) > 0 {
			out[t] = d.Personal
		}
	}
	return out
}

// PersonalCommands returns its domains' declarations of personal data
// in command payloads, by aggregate type then command type
// (commands.Domain.PersonalCommands): what a privacy.Sealer seals for
// the bus. Empty when no domain declares any.
func (c *Catalog) PersonalCommands() map[string]map[string]privacy.Personal {
	out := map[string]map[string]privacy.Personal{}
	for t, d := range c.domains {
		if len(d.PersonalCommands) > 0 {
			out[t] = d.PersonalCommands
		}
	}
	return out
}

// AddReadModel registers the Postgres read model p as a consumer
// (ReadModel) under its name, which no other consumer of any kind may
// hold (a *NameTakenError).
func (c *Catalog) AddReadModel(p projections.Projection) error {
	if p == nil {
		return fmt.Errorf("eventpipe: read model is nil")
	}
	if err := c.AddConsumer(ReadModel(p)); err != nil {
		return err
	}
	c.readModels[p.Name()] = p
	return nil
}

// AddSearchModel registers the Elasticsearch read model p as a consumer
// (SearchModel) under its name (its index alias is that name, after the
// topic prefix), which no other consumer of any kind may hold (a
// *NameTakenError).
func (c *Catalog) AddSearchModel(p elastic.Projection) error {
	if p == nil {
		return fmt.Errorf("eventpipe: search model is nil")
	}
	if p.Name() != strings.ToLower(p.Name()) {
		return fmt.Errorf("eventpipe: search model %q: %w", p.Name(), &eventstore.ValidationError{Field: "name", Reason: "Elasticsearch names are lower case"})
	}
	if err := c.AddConsumer(SearchModel(p)); err != nil {
		return err
	}
	c.searchModels[p.Name()] = p
	return nil
}

// AddHTTPResource registers an HTTP resource under name; a name
// registered twice is an error.
func (c *Catalog) AddHTTPResource(name string, r HTTPResource) error {
	if err := eventstore.ValidateName("http_resource", name); err != nil {
		return fmt.Errorf("eventpipe: HTTP resource: %w", err)
	}
	if r == nil {
		return fmt.Errorf("eventpipe: HTTP resource %q is nil", name)
	}
	if _, dup := c.httpResources[name]; dup {
		return &NameTakenError{Name: name, Kind: "HTTP resource", Holder: "HTTP resource"}
	}
	c.httpResources[name] = r
	return nil
}

// HTTPResourceNames are the names of the catalogue's HTTP resources,
// sorted: the resource names an auth policy grants (with "status" and
// "metrics", the operator's).
func (c *Catalog) HTTPResourceNames() []string { return sortedKeys(c.httpResources) }

// Upcasters is the catalogue's upcaster registry: register an upcaster
// here once and the store, the facets and the relay built from this
// catalogue all apply it.
func (c *Catalog) Upcasters() *eventstore.Upcasters { return &c.upcasters }

// Schema is the event types of every domain and the upcasters: what the
// event store accepts and how it reads.
func (c *Catalog) Schema() eventstore.Schema {
	types := eventstore.EventTypes{}
	for _, d := range c.domains {
		for t := range d.EventTypes {
			types[t] = struct{}{}
		}
	}
	return eventstore.Schema{Types: types, Upcasters: &c.upcasters}
}

// EventSchemas returns the schema of every event type of the
// catalogue's domains: its aggregate type, its current version (from the
// catalogue's upcasters) and its payload's JSON shape, from the typed
// definitions (package schemas; `eventpipe schemas check` compares it
// with the committed snapshot). An upcaster chain with a gap, or an
// event type of two domains, is a *eventstore.ValidationError.
func (c *Catalog) EventSchemas() (schemas.Registry, error) {
	ds := make([]commands.Domain, 0, len(c.domains))
	for _, t := range c.AggregateTypes() {
		ds = append(ds, c.domains[t])
	}
	return schemas.FromDomains(ds, &c.upcasters)
}

// AggregateTypeOf returns the aggregate type whose handler takes
// commandType.
func (c *Catalog) AggregateTypeOf(commandType string) (string, bool) {
	t, ok := c.commands[commandType]
	return t, ok
}

// aggregateTypeOfEvent names the aggregate type of the domain that
// records eventType, "" when no domain of c does.
func (c *Catalog) aggregateTypeOfEvent(eventType string) string {
	if c == nil {
		return ""
	}
	for _, at := range c.AggregateTypes() {
		if slices.Contains(c.domains[at].EventTypes.Names(), eventType) {
			return at
		}
	}
	return ""
}

// CommandTypes returns every registered command type, sorted.
func (c *Catalog) CommandTypes() []string { return sortedKeys(c.commands) }

// AggregateTypes returns every registered aggregate type, sorted.
func (c *Catalog) AggregateTypes() []string { return sortedKeys(c.domains) }

// Domain returns the domain registered for aggregateType.
func (c *Catalog) Domain(aggregateType string) (commands.Domain, bool) {
	d, ok := c.domains[aggregateType]
	return d, ok
}

// ReadModel returns the read model registered under name.
func (c *Catalog) ReadModel(name string) (projections.Projection, bool) {
	p, ok := c.readModels[name]
	return p, ok
}

// ReadModelNames returns the names of the registered Postgres read
// models, sorted.
func (c *Catalog) ReadModelNames() []string { return sortedKeys(c.readModels) }

// SearchModel returns the Elasticsearch read model registered under name.
func (c *Catalog) SearchModel(name string) (elastic.Projection, bool) {
	p, ok := c.searchModels[name]
	return p, ok
}

// SearchModelNames returns the names of the registered Elasticsearch read
// models, sorted.
func (c *Catalog) SearchModelNames() []string { return sortedKeys(c.searchModels) }

// ModelNames returns the names of every registered read model, Postgres
// and Elasticsearch, sorted: what consume and replay take.
func (c *Catalog) ModelNames() []string {
	names := append(c.ReadModelNames(), c.SearchModelNames()...)
	sort.Strings(names)
	return names
}

// Handlers builds every domain's command handlers on store, with the
// catalogue's upcasters, into one registry.
func (c *Catalog) Handlers(store eventstore.Store) (*commands.Registry, error) {
	reg := &commands.Registry{}
	for _, t := range c.AggregateTypes() {
		hs, err := c.domains[t].NewHandlers(store, &c.upcasters)
		if err != nil {
			return nil, fmt.Errorf("eventpipe: handlers of %s: %w", t, err)
		}
		if err := reg.Register(hs...); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
