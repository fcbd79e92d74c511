package eventpipe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/analytics/analyticsapi"

	"github.com/eventpipe/eventpipe/domains/order/orderapi"
	"github.com/eventpipe/eventpipe/projections/elastic"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
	"github.com/eventpipe/eventpipe/projections/rollups"
	"github.com/eventpipe/eventpipe/projections/searchmodels"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/components/metrics"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/domains/todo/todoapi"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/health"
	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/httpapi/auth"
	"github.com/eventpipe/eventpipe/projections/readmodels"
)

// DefaultCommandGroup is the consumer group of the command handlers.
const DefaultCommandGroup = "eventpipe-commands"

// WriteSideConfig configures the write side.
type WriteSideConfig struct {
	// Process: the catalogue (its domains and upcasters), the endpoints
	// (DynamoDB and the events table, Kafka, the HTTP address) and the
	// logger (defaults: see Process).
	Process
	// ConsumerGroup of the command handlers (default DefaultCommandGroup).
	ConsumerGroup string
	// Publisher publishes results and poisoned commands (default: a Kafka
	// publisher on Endpoints.KafkaBrokers, closed by Close; one given here
	// is the caller's to close).
	Publisher message.Publisher
	// NewSubscriber returns the subscriber of each commands topic, in the
	// command handlers' consumer group (default: Kafka subscribers on
	// Endpoints.KafkaBrokers).
	NewSubscriber bus.SubscriberConstructor
	// Store is the event store the command handlers append to (default:
	// the DynamoDB events table of Endpoints, OpenStore). One given here
	// is the caller's, such as the in-memory eventstore/memstore.Store of
	// package testkit/pipeline (tests and local experiments only).
	Store eventstore.Store
	// CommandRetention is how long the default Store keeps each command
	// record and Idempotency-Key claim (their DynamoDB ttl): a command or
	// an HTTP request retried within it is answered from its record, one
	// retried later runs again. Default DefaultCommandRetention (7 days);
	// not applied to a given Store. `serve` reads it from
	// --command-retention.
	CommandRetention time.Duration
	// Middlewares wrap the dispatcher inside the standard chain (poison,
	// retry, recoverer), in order, outermost first: a handler middleware
	// sees each command message after it was decoded from Kafka and
	// before it is acked (tracing, auditing, test hooks).
	Middlewares []message.HandlerMiddleware
	// OperatorAddr, when set, is the listen address of the operator
	// surface: /metrics and the OperatorRoutes (and /healthz) are served
	// there (NewOperatorHTTP) and not on the API's listener, which then
	// serves the API and /healthz only. On a loopback address (127.0.0.0/8,
	// ::1, localhost) it is open to the host's own processes; on any other
	// address it is behind Auth (the policy's read grants of status and
	// metrics), and without Auth the configuration is refused unless
	// OperatorInsecure says otherwise (see OperatorAccess). Empty (the
	// default): the operator surface shares the API's listener and its
	// authentication. `serve` reads it from --operator-addr or
	// EVENTPIPE_OPERATOR_ADDR.
	OperatorAddr string
	// OperatorInsecure serves OperatorAddr open when it is not a loopback
	// address and Auth is nil: anyone who reaches it reads the metrics and
	// the status page (the policy, topics, groups, operator actions). For
	// a private network you trust only; `serve --operator-insecure` sets
	// it and warns at start.
	OperatorInsecure bool
	// OperatorRoutes, when set, mounts the operator surface's own routes
	// beside /metrics: on the API's server (NewHTTP), behind its
	// authentication, when OperatorAddr is empty, else on the operator
	// listener's (NewOperatorHTTP). `serve` mounts the status page with
	// it (operator.MountStatusPage: GET /status and /status.json). Nil:
	// the operator surface is /metrics alone.
	OperatorRoutes OperatorRoutes
	// HTTPLimits bound each connection of the API's and the operator's
	// listeners: read, write and idle time and header size (zero fields:
	// httpapi's defaults). `serve` reads them from its --http-* flags or
	// the EVENTPIPE_HTTP_* variables (httpapi.LimitsFromEnv).
	HTTPLimits httpapi.Limits
	// Auth, when set, turns on JWT bearer authentication and its policy on
	// the API's listener (package httpapi/auth): every request but
	// /healthz needs a valid token, the todo API asks the policy before
	// each command and read and records the token's subject as the
	// events' actor, and every other resource needs the policy's read or
	// write grant. The operator listener (OperatorAddr) is behind it too
	// unless it is bound to loopback. `serve` reads it from the
	// EVENTPIPE_AUTH_* variables. Nil: NewHTTP refuses to serve unless
	// NoAuth says the API is meant to be open.
	Auth *auth.Config
	// NoAuth serves the HTTP API without authentication when Auth is nil:
	// anyone who reaches it can send every command and read everything.
	// For local development and tests only; `serve` sets it with
	// --no-auth (or EVENTPIPE_AUTH=off) and says so loudly at start.
	NoAuth bool
	// CommandKey, when set (at least commands.MinKeyLength bytes, the
	// same for every serve and consume of the deployment), reserves the
	// command ids of the catalogue's sagas (<saga>.<instance>.<step>) for
	// commands the sagas signed with it: a command from the bus under
	// such an id without a valid signature is answered invalid and
	// poisoned without being recorded, so no client can take a saga
	// step's id first. Empty (the default, for now): any client may use
	// those ids. `serve` reads it from EVENTPIPE_COMMAND_KEY_FILE or
	// EVENTPIPE_COMMAND_KEY (CommandKeyFromEnv).
	CommandKey []byte
	// ProducerKeys are the keys, by key id, that producers of commands
	// on the bus sign with (commands.Signer; `send` and NewSender's
	// SenderConfig.Signer): a command signed with one has its actor
	// recorded as verified (eventstore.ActorSigned) and its answer
	// signed; one whose signature does not verify is refused
	// (commands.ErrBadSignature). `serve` reads them from
	// EVENTPIPE_COMMAND_PRODUCER_KEYS_FILE (ProducerKeysFromEnv).
	ProducerKeys commands.Keys
	// RequireSignedCommands refuses every command from the bus that is
	// not signed with a ProducerKeys key or the CommandKey: answered
	// invalid with commands.ErrUnsigned, poisoned, nothing stored. False
	// (the default): an unsigned command runs and its events record
	// their actor as claimed (eventstore.ActorClaimed). Commands of the
	// HTTP API carry the verified token's subject either way. `serve`
	// reads it from --require-signed-commands or
	// EVENTPIPE_REQUIRE_SIGNED_COMMANDS.
	RequireSignedCommands bool
	// Probes are served on the API's listener and on the operator
	// listener (/livez, /readyz, /startupz, open like /healthz): Run
	// adds the write side's checks (the events table answers, every
	// commands group is Stable with members, the command router runs)
	// and marks them started once the router runs and the API listens.
	// The caller drains them (health.Probes.Drain) when asked to stop.
	// Default: the write side's own (WriteSide.Probes). `serve` sets
	// them.
	Probes *health.Probes
	// ShutdownTimeout bounds, once Run's context ends, the wait for the
	// HTTP requests and the commands in flight (default
	// DefaultShutdownTimeout). `serve` derives it from --grace-period.
	ShutdownTimeout time.Duration
}

// DefaultShutdownTimeout is WriteSideConfig.ShutdownTimeout's default.
const DefaultShutdownTimeout = 10 * time.Second

func (c *WriteSideConfig) setDefaults() {
	_ = c.FillProcess() // Validate reports Endpoints.Err
	if c.ConsumerGroup == "" {
		c.ConsumerGroup = DefaultCommandGroup
	}
	if c.CommandRetention == 0 {
		c.CommandRetention = DefaultCommandRetention
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.NewSubscriber == nil {
		c.NewSubscriber = kafka.Subscribers(kafka.SubscriberConfig{Brokers: c.Endpoints.KafkaBrokers, Security: c.Endpoints.Kafka, InstanceID: c.Endpoints.KafkaInstanceID, ClientID: "eventpipe-serve",
			Logger: watermill.NewSlogLogger(c.Logger)})
	}
}

// Validate reports the first invalid field, an
// *eventstore.ValidationError, the defaults filled (as NewWriteSide
// fills them).
func (c WriteSideConfig) Validate() error {
	c.setDefaults()
	if err := c.validate(); err != nil {
		return fmt.Errorf("write side: %w", err)
	}
	return nil
}

func (c WriteSideConfig) validate() error {
	if err := c.Process.Validate(); err != nil {
		return err
	}
	if len(c.Endpoints.KafkaBrokers) == 0 && (c.Publisher == nil || c.NewSubscriber == nil) {
		return invalid("Endpoints.KafkaBrokers", "none (needed unless Publisher and NewSubscriber are set)")
	}
	if c.Endpoints.EventsTable == "" {
		return invalid("Endpoints.EventsTable", "is empty")
	}
	if c.CommandRetention < 0 {
		return invalid("CommandRetention", fmt.Sprintf("%v is negative", c.CommandRetention))
	}
	if c.ShutdownTimeout < 0 {
		return invalid("ShutdownTimeout", fmt.Sprintf("%v is negative", c.ShutdownTimeout))
	}
	if err := c.HTTPLimits.Validate(); err != nil {
		var ve *eventstore.ValidationError
		if errors.As(err, &ve) {
			return invalid("HTTP"+ve.Field, ve.Reason)
		}
		return err
	}
	if c.Auth != nil {
		if c.NoAuth {
			return invalid("NoAuth", "set Auth or NoAuth, not both")
		}
		if err := c.Auth.Validate(); err != nil {
			return invalidErr("Auth", err)
		}
	}
	if c.OperatorAddr != "" {
		if _, _, err := net.SplitHostPort(c.OperatorAddr); err != nil {
			return invalid("OperatorAddr", fmt.Sprintf("%q: %v", c.OperatorAddr, err))
		}
		if c.OperatorAddr == c.Endpoints.HTTPAddr {
			return invalid("OperatorAddr", fmt.Sprintf("%q is the API's own address", c.OperatorAddr))
		}
		if c.OperatorAccess() == OperatorRefused {
			return invalid("OperatorAddr", fmt.Sprintf("%q is not a loopback address and the HTTP API has no authentication, so the operator listener would be open to anyone who reaches it: "+
				"bind it to loopback (127.0.0.1), configure JWT auth, or set OperatorInsecure (serve --operator-insecure) if the network is trusted", c.OperatorAddr))
		}
	}
	if err := validCommandKey(c.CommandKey); err != nil {
		return err
	}
	if err := c.ProducerKeys.Validate(); err != nil {
		return invalidErr("ProducerKeys", err)
	}
	if c.RequireSignedCommands && len(c.ProducerKeys) == 0 && len(c.CommandKey) == 0 {
		return invalid("RequireSignedCommands", "no key to verify with: set ProducerKeys or CommandKey")
	}
	if err := bus.ValidateTopic(c.topics().Poison(c.ConsumerGroup)); err != nil {
		return invalid("ConsumerGroup", err.Error())
	}
	return nil
}

// OperatorAccess is how the operator surface is guarded
// (WriteSideConfig.OperatorAccess).
type OperatorAccess string

// The ways the operator surface can be guarded.
const (
	// OperatorOnAPI: no OperatorAddr; the surface is on the API's
	// listener, behind its authentication (or open with NoAuth).
	OperatorOnAPI OperatorAccess = "on the API's listener"
	// OperatorLoopback: OperatorAddr is a loopback address, open to the
	// host's own processes (Prometheus beside the process, an SSH
	// tunnel).
	OperatorLoopback OperatorAccess = "loopback, without authentication"
	// OperatorAuthenticated: OperatorAddr is not loopback and is behind
	// Auth, the same JWT and policy as the API: reading /status and
	// /status.json needs a read grant of status, /metrics one of metrics.
	OperatorAuthenticated OperatorAccess = "JWT authentication (read grants status and metrics; subjects: read exports, write forgets)"
	// OperatorOpen: OperatorAddr is not loopback, without authentication,
	// because OperatorInsecure says so.
	OperatorOpen OperatorAccess = "WITHOUT AUTHENTICATION off loopback (OperatorInsecure)"
	// OperatorRefused: OperatorAddr is not loopback and nothing would
	// guard it; Validate refuses the configuration.
	OperatorRefused OperatorAccess = "refused: open off loopback"
)

// OperatorAccess says how the operator surface is guarded: on the API's
// listener, on loopback (open), behind Auth, open because
// OperatorInsecure says so, or refused.
func (c WriteSideConfig) OperatorAccess() OperatorAccess {
	switch {
	case c.OperatorAddr == "":
		return OperatorOnAPI
	case isLoopback(c.OperatorAddr):
		return OperatorLoopback
	case c.Auth != nil:
		return OperatorAuthenticated
	case c.OperatorInsecure:
		return OperatorOpen
	}
	return OperatorRefused
}

// isLoopback reports whether addr (host:port) listens on loopback only:
// an IP of 127.0.0.0/8 or ::1, or localhost. An empty host (every
// interface) or another name is not.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (c WriteSideConfig) topics() bus.Topics {
	return bus.Topics{Prefix: c.Endpoints.TopicPrefix}
}

// OperatorRoutes mounts routes of the operator surface on srv, the server
// that carries it (see WriteSideConfig.OperatorRoutes), reaching the
// write side through w. It runs each time such a server is built. What
// it returns, when not nil, is closed when that server's Run (in
// WriteSide.Run) ends, or else by WriteSide.Close: a status page's
// sampling, for example.
type OperatorRoutes func(srv *httpapi.Server, w *WriteSide) (io.Closer, error)

// WriteSide is the write side of the pipeline: the DynamoDB event store,
// the catalogue's command handlers, the dispatcher consuming the commands
// topics in one consumer group, and the HTTP API. `eventpipe serve` runs
// it; tests run it in-process or as a child process to kill.
type WriteSide struct {
	cfg WriteSideConfig
	// Store is the event store the command handlers append to: the
	// DynamoDB store, or WriteSideConfig.Store when one was given.
	Store eventstore.Store
	// Handlers are the command handlers of every domain of the catalogue.
	Handlers *commands.Registry
	// Dispatcher runs commands through Handlers (the command topics' and
	// the HTTP API's entry point).
	Dispatcher *commands.Dispatcher
	// Registry holds the write side's Prometheus metrics (served on
	// /metrics of the HTTP API).
	Registry   *prometheus.Registry
	pub        message.Publisher
	ownPub     bool          // pub was opened by NewWriteSide and is closed by Close
	readModels *pgxpool.Pool // connects on first use
	search     *esclient.Client
	analytics  *analytics.Store
	auth       *auth.Authenticator // nil: the API is open

	// operatorClosers are what the OperatorRoutes of NewHTTP and
	// NewOperatorHTTP returned; Run and Close close them.
	operatorClosers []io.Closer
	// routing is true while the command router runs.
	routing atomic.Bool
}

// OperatorResources are the resources of the operator's routes
// (/metrics, /status and /status.json, /subjects/{id}/forget and
// /subjects/{id}/export) as an auth policy names them, beside the
// catalogue's HTTP resources.
var OperatorResources = []string{"metrics", "status", "subjects"}

// NewWriteSide connects to DynamoDB (without an injected Store) and
// Kafka (without an injected Publisher) and assembles the write side.
func NewWriteSide(ctx context.Context, cfg WriteSideConfig) (*WriteSide, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Probes == nil {
		p, err := health.New(health.Config{Logger: cfg.Logger})
		if err != nil {
			return nil, fmt.Errorf("write side: %w", err)
		}
		cfg.Probes = p
	}
	var authn *auth.Authenticator
	if cfg.Auth != nil {
		ac := *cfg.Auth
		ac.Delegated = append(append(append([]string(nil), ac.Delegated...), todoapi.Resource), analyticsapi.Resources...)
		if ac.Policy != nil { // without one auth.New refuses the config below
			if err := ac.Policy.CheckNames(cfg.Catalog.CommandTypes(), append(cfg.Catalog.HTTPResourceNames(), OperatorResources...)); err != nil {
				return nil, fmt.Errorf("write side: auth policy: %w", err)
			}
		}
		if ac.Logger == nil {
			ac.Logger = cfg.Logger
		}
		var err error
		if authn, err = auth.New(ac); err != nil {
			return nil, fmt.Errorf("write side: %w", err)
		}
	}
	store, err := storeOr(ctx, cfg.Store, cfg.Endpoints, cfg.Catalog, cfg.Logger, cfg.CommandRetention)
	if err != nil {
		return nil, err
	}
	handlers, err := cfg.Catalog.Handlers(store)
	if err != nil {
		return nil, err
	}
	pub, ownPub := cfg.Publisher, cfg.Publisher == nil
	if ownPub {
		kp, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: cfg.Endpoints.KafkaBrokers, Security: cfg.Endpoints.Kafka, ClientID: "eventpipe-serve", Logger: watermill.NewSlogLogger(cfg.Logger)})
		if err != nil {
			return nil, err
		}
		pub = kp
	}
	closePub := func() {
		if ownPub {
			_ = pub.Close()
		}
	}
	signed := commands.SignedIDs{Key: cfg.CommandKey}
	for _, name := range cfg.Catalog.SagaNames() {
		signed.Prefixes = append(signed.Prefixes, name+".")
	}
	if len(cfg.CommandKey) == 0 && len(signed.Prefixes) > 0 {
		cfg.Logger.Warn("no command key: any client can send a command under a saga's command id (set EVENTPIPE_COMMAND_KEY_FILE)", "sagas", cfg.Catalog.SagaNames())
	}
	sealer, _ := openerOf(store).(eventstore.CommandSealer)
	disp, err := commands.NewDispatcher(commands.DispatcherConfig{Registry: handlers, Outcomes: store, Replies: pub, Topics: cfg.topics(),
		Signed: signed, Keys: cfg.ProducerKeys, RequireSigned: cfg.RequireSignedCommands, Sealer: sealer, Logger: cfg.Logger})
	if err != nil {
		closePub()
		return nil, err
	}
	reg := NewMetricsRegistry()
	// OpenPostgres does not connect: the write side runs without Postgres,
	// and GET /todo answers 503 until it is there.
	readModels, err := OpenPostgres(ctx, cfg.Endpoints)
	if err != nil {
		closePub()
		return nil, fmt.Errorf("write side: read-model database: %w", err)
	}
	// Nor does the Elasticsearch client: the search endpoints answer 503
	// until Elasticsearch is there.
	search, err := esclient.NewClient(cfg.Endpoints.Elasticsearch, cfg.Endpoints.ElasticsearchSecurity)
	if err != nil {
		readModels.Close()
		closePub()
		return nil, fmt.Errorf("write side: %w", err)
	}
	an, err := OpenAnalytics(ctx, cfg.Endpoints, cfg.Logger)
	if err != nil {
		readModels.Close()
		closePub()
		return nil, fmt.Errorf("write side: %w", err)
	}
	return &WriteSide{cfg: cfg, Store: store, Handlers: handlers, Dispatcher: disp, Registry: reg, pub: pub, ownPub: ownPub,
		readModels: readModels, search: search, analytics: an, auth: authn}, nil
}

// Probes returns the write side's health probes
// (WriteSideConfig.Probes).
func (s *WriteSide) Probes() *health.Probes { return s.cfg.Probes }

// Endpoints returns the resolved endpoints.
func (s *WriteSide) Endpoints() endpoints.Endpoints { return s.cfg.Endpoints }

// Config returns the configuration the write side was built with, its
// defaults filled (Endpoints, Catalog, ConsumerGroup, Logger).
func (s *WriteSide) Config() WriteSideConfig { return s.cfg }

// Catalog returns the catalogue the write side was built from.
func (s *WriteSide) Catalog() *Catalog { return s.cfg.Catalog }

// ReadModels returns the pool of the read-model database (Postgres),
// for HTTP resources that answer from a read model. It connects on first
// use, so the write side runs without Postgres.
func (s *WriteSide) ReadModels() *pgxpool.Pool { return s.readModels }

// Search returns the client of the search models' Elasticsearch, for HTTP
// resources that answer from a search model. Aliases are
// SearchAlias(name).
func (s *WriteSide) Search() *esclient.Client { return s.search }

// Analytics returns the analytics store (package analytics), for HTTP
// resources that ingest or read analytics.
func (s *WriteSide) Analytics() *analytics.Store { return s.analytics }

// SearchAlias is the index alias of the search model called name in this
// write side's topic namespace.
func (s *WriteSide) SearchAlias(name string) string {
	return elastic.Alias(s.cfg.Endpoints.TopicPrefix, name)
}

// Close closes what the OperatorRoutes returned (a status page's
// sampling) and releases the read-model pool and the publisher
// NewWriteSide opened.
func (s *WriteSide) Close() error {
	for _, c := range s.operatorClosers {
		_ = c.Close()
	}
	s.readModels.Close()
	if !s.ownPub {
		return nil
	}
	return s.pub.Close()
}

// RunCommandHandlers consumes every commands topic in the consumer group
// until ctx ends. Each message runs through the middleware chain
// (correlation id, poison queue for permanent errors, retry with backoff,
// recoverer) and is acked only after its result was published.
func (s *WriteSide) RunCommandHandlers(ctx context.Context) error {
	logger := watermill.NewSlogLogger(s.cfg.Logger)
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: s.cfg.ShutdownTimeout}, logger)
	if err != nil {
		return err
	}
	mws, err := bus.Middlewares(bus.MiddlewareConfig{PoisonPublisher: s.pub, PoisonTopic: s.cfg.topics().Poison(s.cfg.ConsumerGroup), Logger: s.cfg.Logger})
	if err != nil {
		return err
	}
	router.AddMiddleware(mws...)
	router.AddMiddleware(s.cfg.Middlewares...)
	metrics.NewPrometheusMetricsBuilder(s.Registry, "eventpipe", "commands").AddPrometheusRouterMetrics(router)
	var subs []message.Subscriber
	defer func() {
		for _, sub := range subs {
			_ = sub.Close()
		}
	}()
	// One consumer group per commands topic (<group>.<topic>), so a
	// rebalance on one topic does not pause the others.
	for _, topic := range s.Dispatcher.Topics() {
		sub, err := s.cfg.NewSubscriber(CommandGroup(s.cfg.ConsumerGroup, topic))
		if err != nil {
			return fmt.Errorf("write side: subscriber for %s: %w", topic, err)
		}
		subs = append(subs, sub)
		router.AddConsumerHandler("commands:"+topic, topic, sub, s.Dispatcher.HandleMessage)
	}
	go func() {
		select {
		case <-router.Running():
			s.routing.Store(true)
		case <-ctx.Done():
		}
	}()
	if err := router.Run(ctx); err != nil {
		s.routing.Store(false)
		return fmt.Errorf("write side: command router: %w", err)
	}
	return nil
}

// ErrNoAuth is returned by NewHTTP (and Run) when WriteSideConfig has
// neither Auth nor NoAuth: the HTTP API is not served open by accident.
var ErrNoAuth = errors.New("write side: the HTTP API has no authentication: set WriteSideConfig.Auth (JWT, see docs/security.md), or NoAuth for local development")

// CommandGroup is the consumer group in which the command handlers of
// group (WriteSideConfig.ConsumerGroup) consume one commands topic:
// <group>.<topic>, one group per topic (see RunCommandHandlers).
func CommandGroup(group, topic string) string { return group + "." + topic }

// NewHTTP returns the HTTP API on Endpoints.HTTPAddr with every HTTP
// resource of the catalogue mounted, in name order, and, unless
// OperatorAddr is set, the operator surface: /metrics and the
// OperatorRoutes (`serve`'s status page). With WriteSideConfig.Auth,
// every route but /healthz is behind its authentication and policy.
func (s *WriteSide) NewHTTP() (*httpapi.Server, error) {
	if s.auth == nil && !s.cfg.NoAuth {
		return nil, ErrNoAuth
	}
	separate := s.cfg.OperatorAddr != ""
	hc := httpapi.Config{Addr: s.cfg.Endpoints.HTTPAddr, Registry: s.Registry, OmitMetrics: separate, Logger: s.cfg.Logger, Limits: s.cfg.HTTPLimits, ShutdownTimeout: s.cfg.ShutdownTimeout}
	if s.auth != nil {
		hc.Middleware = s.auth.Middleware
	}
	srv, err := httpapi.New(hc)
	if err != nil {
		return nil, err
	}
	s.cfg.Probes.Mount(srv.Mux)
	if !separate {
		if err := s.mountOperatorRoutes(srv); err != nil {
			return nil, err
		}
	}
	for _, name := range sortedKeys(s.cfg.Catalog.httpResources) {
		if err := s.cfg.Catalog.httpResources[name](srv, s); err != nil {
			return nil, fmt.Errorf("write side: HTTP resource %s: %w", name, err)
		}
	}
	return srv, nil
}

// NewOperatorHTTP returns the operator surface on OperatorAddr: /healthz,
// /metrics and the OperatorRoutes, behind Auth unless OperatorAddr is a
// loopback address (see WriteSideConfig.OperatorAccess); it logs which
// at INFO, or at WARN when it is open off loopback. It is an error when
// OperatorAddr is not set (NewHTTP serves them then).
func (s *WriteSide) NewOperatorHTTP() (*httpapi.Server, error) {
	if s.cfg.OperatorAddr == "" {
		return nil, errors.New("write side: no OperatorAddr: the operator surface is on the API's listener")
	}
	hc := httpapi.Config{Addr: s.cfg.OperatorAddr, Registry: s.Registry, Logger: s.cfg.Logger, Limits: s.cfg.HTTPLimits, ShutdownTimeout: s.cfg.ShutdownTimeout}
	switch access := s.cfg.OperatorAccess(); access {
	case OperatorAuthenticated:
		hc.Middleware = s.auth.Middleware
		s.cfg.Logger.Info("operator listener behind JWT authentication: /status and /status.json need a read grant of status, /metrics one of metrics, /subjects a read (export) or write (forget) grant of subjects", "addr", s.cfg.OperatorAddr)
	case OperatorLoopback:
		s.cfg.Logger.Info("operator listener on loopback, without authentication: open to this host's processes", "addr", s.cfg.OperatorAddr)
	case OperatorOpen:
		s.cfg.Logger.Warn("THE OPERATOR LISTENER IS UNAUTHENTICATED OFF LOOPBACK (--operator-insecure): anyone who reaches "+s.cfg.OperatorAddr+" reads the metrics and the status page (policy, topics, groups, operator actions)", "addr", s.cfg.OperatorAddr)
	default:
		return nil, fmt.Errorf("write side: operator listener %s: %s", s.cfg.OperatorAddr, access)
	}
	srv, err := httpapi.New(hc)
	if err != nil {
		return nil, err
	}
	s.cfg.Probes.Mount(srv.Mux)
	if err := s.mountOperatorRoutes(srv); err != nil {
		return nil, err
	}
	return srv, nil
}

// mountOperatorRoutes mounts the OperatorRoutes on srv; Close (or Run)
// closes what they return.
func (s *WriteSide) mountOperatorRoutes(srv *httpapi.Server) error {
	if s.cfg.OperatorRoutes == nil {
		return nil
	}
	c, err := s.cfg.OperatorRoutes(srv, s)
	if err != nil {
		return fmt.Errorf("write side: %w", err)
	}
	if c != nil {
		s.operatorClosers = append(s.operatorClosers, c)
	}
	return nil
}

// Run runs the command handlers, the HTTP API and, with OperatorAddr, the
// operator surface until ctx ends or one of them fails.
func (s *WriteSide) Run(ctx context.Context) error {
	mounted := len(s.operatorClosers)
	defer func() { // what the OperatorRoutes of Run's servers returned ends with them
		for _, c := range s.operatorClosers[mounted:] {
			_ = c.Close()
		}
		s.operatorClosers = s.operatorClosers[:mounted]
	}()
	runs := []func(context.Context) error{s.RunCommandHandlers}
	srv, err := s.NewHTTP()
	if err != nil {
		return err
	}
	listening := make(chan string, 1)
	runs = append(runs, func(ctx context.Context) error { return srv.Run(ctx, listening) })
	if err := s.addChecks(ctx, listening); err != nil {
		return err
	}
	if s.cfg.OperatorAddr != "" {
		op, err := s.NewOperatorHTTP()
		if err != nil {
			return err
		}
		runs = append(runs, func(ctx context.Context) error { return op.Run(ctx, nil) })
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(runs))
	for _, run := range runs {
		go func() { errc <- run(ctx) }()
	}
	errs := []error{<-errc}
	cancel()
	for range runs[1:] {
		errs = append(errs, <-errc)
	}
	return errors.Join(errs...)
}

// addChecks adds the write side's checks to its Probes, if any, and
// marks them started once the API listens (listening) and the command
// router runs.
func (s *WriteSide) addChecks(ctx context.Context, listening <-chan string) error {
	p := s.cfg.Probes
	p.AddLive(CheckCommands, func(context.Context) error {
		if p.IsStarted() && !s.routing.Load() {
			return errors.New("the command router stopped")
		}
		return nil
	})
	if s.cfg.Store == nil {
		ddb, err := OpenDynamoDB(ctx, s.cfg.Endpoints)
		if err != nil {
			return fmt.Errorf("write side: %w", err)
		}
		p.AddReady(CheckDynamoDB, tableCheck(ddb, s.cfg.Endpoints.EventsTable))
	}
	if len(s.cfg.Endpoints.KafkaBrokers) > 0 {
		reader, err := kafka.NewOffsetReader(kafka.Cluster{Brokers: s.cfg.Endpoints.KafkaBrokers, Security: s.cfg.Endpoints.Kafka})
		if err != nil {
			return fmt.Errorf("write side: %w", err)
		}
		s.operatorClosers = append(s.operatorClosers, closerFunc(reader.Close))
		var groups []readyGroup
		for _, topic := range s.Dispatcher.Topics() {
			groups = append(groups, readyGroup{group: CommandGroup(s.cfg.ConsumerGroup, topic)})
		}
		p.AddReady(CheckKafka, groupsCheck(reader, groups))
	}
	// Not Postgres nor Elasticsearch: without them commands still work
	// and only the reads from models answer 503, so a serve that failed
	// its readiness for them would take the whole API out of its load
	// balancer for the sake of some reads.
	go func() {
		select {
		case <-listening:
		case <-ctx.Done():
			return
		}
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for !s.routing.Load() {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
		p.Started()
		s.cfg.Logger.Info("started: the command router runs and the API listens")
	}()
	return nil
}

// closerFunc makes a func() an io.Closer.
type closerFunc func()

func (f closerFunc) Close() error { f(); return nil }

// todoResource is the todo API (domains/todo/todoapi) on the write side:
// commands through its dispatcher, states from the todo facet, the list
// from the todos read model.
func todoResource(srv *httpapi.Server, w *WriteSide) error {
	facet, err := todo.NewFacet(w.Store, w.Catalog().Upcasters())
	if err != nil {
		return err
	}
	return todoapi.Mount(srv, todoapi.Config{
		Commands: w.Dispatcher,
		States:   facet,
		Records:  w.Store, // Idempotency-Key: claims and command records
		List: func(ctx context.Context, q readmodels.TodoList) ([]readmodels.Todo, error) {
			return readmodels.ListTodos(ctx, w.ReadModels(), q)
		},
		Search: searchmodels.TodoIndex{Client: w.Search(), Alias: w.SearchAlias(searchmodels.TodoSearch{}.Name())},
		Policy: w.auth.Policy(),
		Logger: w.cfg.Logger,
	})
}

// analyticsResource is seed 001's analytics API
// (analytics/analyticsapi): ingestion and the six reads.
func analyticsResource(srv *httpapi.Server, w *WriteSide) error {
	return analyticsapi.Mount(srv, analyticsapi.Config{Store: w.Analytics(), Policy: w.auth.Policy(), Logger: w.cfg.Logger})
}

// ordersResource is the orders search (domains/order/orderapi) from the
// orders-search model and the hourly and daily roll-ups from the
// order-rollups read model.
func ordersResource(srv *httpapi.Server, w *WriteSide) error {
	return orderapi.Mount(srv, orderapi.Config{
		Search: searchmodels.OrderIndex{Client: w.Search(), Alias: w.SearchAlias(searchmodels.OrderSearch{}.Name())},
		Rollups: func(ctx context.Context, q rollups.Query) ([]rollups.Row, error) {
			return rollups.Read(ctx, w.ReadModels(), rollups.OrdersName, q.Period, q.From, q.To)
		},
		Logger: w.cfg.Logger,
	})
}
