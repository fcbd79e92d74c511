package eventpipe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/privacy"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/eventstore"
	ddbstore "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/internal/dynamoclient"
	"github.com/eventpipe/eventpipe/internal/kmsclient"
	"github.com/eventpipe/eventpipe/internal/secretenv"
)

// Endpoints are the addresses and names every part of eventpipe agrees
// on: the DynamoDB endpoint and tables, the Kafka brokers and topic
// prefix, the Postgres URL, the HTTP address. EndpointsFromEnv reads them.
// Every Config that takes Endpoints fills each field left empty on its
// own, from the environment or its default (Endpoints.Fill): the fields
// that are set are kept.
type Endpoints = endpoints.Endpoints

// EndpointsFromEnv returns the endpoints from the environment
// (EVENTPIPE_DYNAMODB_ENDPOINT, EVENTPIPE_KAFKA_BROKERS, …), each
// defaulting to its loopback address or default name.
func EndpointsFromEnv() Endpoints { return endpoints.FromEnv() }

// Process is what every process of eventpipe needs, embedded in each
// process's and operator tool's Config (WriteSideConfig, RelayConfig,
// ConsumersConfig, MigrateConfig, SenderConfig, the operator package's):
// the catalogue it runs, where the rest of the pipeline is, and where it
// logs. Its fields are promoted (cfg.Endpoints, cfg.Logger); a literal
// sets them as Process: eventpipe.Process{Endpoints: ep, Logger: l}. Each
// zero field takes its default when the process starts (FillProcess).
type Process struct {
	// Catalog holds the domains, upcasters, consumers and sagas (default
	// Builtin()).
	Catalog *Catalog
	// Endpoints give DynamoDB and its tables, Kafka and the topic prefix,
	// Postgres, Elasticsearch and the HTTP address: each empty field from
	// the environment or its default (Endpoints.Fill), the fields set are
	// kept.
	Endpoints Endpoints
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// FillProcess fills p's zero fields: the built-in catalogue, each empty
// field of the endpoints from the environment (Endpoints.Fill), slog's
// default logger. It returns why the environment's security settings
// could not be read (Validate reports it too). Only Process's fields:
// each Config's own constructor fills the rest.
func (p *Process) FillProcess() error {
	if p.Catalog == nil {
		p.Catalog = Builtin()
	}
	p.Endpoints = p.Endpoints.Fill()
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	return p.Endpoints.Err()
}

// Validate reports, as an *eventstore.ValidationError of field Endpoints
// that also wraps the cause, why the environment's security settings of
// the endpoints could not be read (Endpoints.Err); and a gap in the
// catalogue's chain of upcasters (eventstore.Upcasters.Validate), so that
// no process (serve, consume, relay, the tools) starts with one.
func (p Process) Validate() error {
	if err := p.Endpoints.Err(); err != nil {
		return fmt.Errorf("%w: %w", &eventstore.ValidationError{Field: "Endpoints", Reason: "the security settings from the environment"}, err)
	}
	if p.Catalog != nil {
		if err := p.Catalog.Upcasters().Validate(); err != nil {
			return fmt.Errorf("catalogue: %w", err)
		}
	}
	return nil
}

// invalid is an *eventstore.ValidationError of field saying reason.
func invalid(field, reason string) error {
	return &eventstore.ValidationError{Field: field, Reason: reason}
}

// validCommandKey refuses a command key shorter than
// commands.MinKeyLength (none is fine).
func validCommandKey(key []byte) error {
	if n := len(key); n > 0 && n < commands.MinKeyLength {
		return invalid("CommandKey", fmt.Sprintf("has %d bytes, want at least %d (openssl rand -hex 32)", n, commands.MinKeyLength))
	}
	return nil
}

// invalidErr is err when it is (or wraps) an *eventstore.ValidationError,
// else one of field wrapping err.
func invalidErr(field string, err error) error {
	if err == nil {
		return nil
	}
	var ve *eventstore.ValidationError
	if errors.As(err, &ve) {
		return err
	}
	return fmt.Errorf("%w: %w", &eventstore.ValidationError{Field: field, Reason: "unusable"}, err)
}

// dynamoConfig is the DynamoDB client configuration of ep: its endpoint
// and the role to assume.
func dynamoConfig(ep Endpoints) dynamoclient.Config {
	return dynamoclient.Config{Endpoint: ep.DynamoDB, RoleARN: ep.AWSRoleARN}
}

// OpenDynamoDB returns a DynamoDB client of ep's endpoint (DynamoDB
// Local, or AWS when ep.DynamoDB is "aws", assuming ep.AWSRoleARN when
// set): the client OpenStore and OpenAnalytics read and write through.
func OpenDynamoDB(ctx context.Context, ep Endpoints) (*dynamodb.Client, error) {
	return dynamoclient.New(ctx, dynamoConfig(ep))
}

// storeOr returns given, or, when it is nil, the DynamoDB store of ep
// (OpenStore): a config's Store field, defaulted.
func storeOr(ctx context.Context, given eventstore.Store, ep Endpoints, c *Catalog, logger *slog.Logger, retention time.Duration) (eventstore.Store, error) {
	if given != nil {
		return given, nil
	}
	s, err := openStore(ctx, ep, c, logger, retention)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// DefaultCommandRetention is how long the event store keeps a command
// record (COMMAND#<id>: the answer of an applied or refused command, and
// an Idempotency-Key's claim) before DynamoDB's TTL may delete it: 7
// days, Kafka's default retention of the commands topics, and well past
// the 24 hours an HTTP client is told it may retry with the same
// Idempotency-Key. A command delivered again after its record expired is
// applied again.
const DefaultCommandRetention = 7 * 24 * time.Hour

// OpenStore connects to the events table of ep (DynamoDB Local, or AWS
// when ep.DynamoDB is "aws") with c's schema: the event types of its
// domains and its upcasters. When c's domains declare personal data, the
// store seals it with the subjects' keys (OpenSealer). The command records it writes expire after
// DefaultCommandRetention (WriteSideConfig.CommandRetention sets the write
// side's). logger may be nil (slog's default).
func OpenStore(ctx context.Context, ep Endpoints, c *Catalog, logger *slog.Logger) (*ddbstore.Store, error) {
	return openStore(ctx, ep, c, logger, DefaultCommandRetention)
}

func openStore(ctx context.Context, ep Endpoints, c *Catalog, logger *slog.Logger, retention time.Duration) (*ddbstore.Store, error) {
	client, err := dynamoclient.New(ctx, dynamoConfig(ep))
	if err != nil {
		return nil, err
	}
	sealer, err := OpenSealer(ctx, ep, c, logger)
	if err != nil {
		return nil, err
	}
	cfg := ddbstore.Config{Client: client, Table: ep.EventsTable, Schema: c.Schema(), Logger: logger, CommandRetention: retention}
	if sealer != nil {
		cfg.Sealer = sealer
	}
	return ddbstore.New(cfg)
}

// OpenSealer returns the sealer of c's personal data (package privacy,
// docs/privacy.md) on ep's key store (OpenKeyStore), or nil when no
// domain of c declares personal data in its events or commands.
// OpenStore seals with it, the command handlers open commands with the
// store's, NewSender seals commands with it.
func OpenSealer(ctx context.Context, ep Endpoints, c *Catalog, logger *slog.Logger) (*privacy.Sealer, error) {
	personal, personalCommands := c.Personal(), c.PersonalCommands()
	if len(personal) == 0 && len(personalCommands) == 0 {
		return nil, nil
	}
	keys, err := OpenKeyStore(ctx, ep, logger)
	if err != nil {
		return nil, fmt.Errorf("personal data keys: %w", err)
	}
	return privacy.NewSealer(privacy.SealerConfig{Keys: keys, Personal: personal, Commands: personalCommands})
}

// openerOf is the opener of store's sealed data: its Sealer when it is
// a DynamoDB store that seals, else nil.
func openerOf(store eventstore.Store) eventstore.Opener {
	if s, ok := store.(*ddbstore.Store); ok {
		if sealer := s.Sealer(); sealer != nil {
			return sealer
		}
	}
	return nil
}

// OpenAnalytics connects to the analytics table of ep (seed 001's raw
// events, sessions and aggregations; see package analytics). It seals
// signed-in users' personal fields with the key store of ep
// (OpenKeyStore), so ep must name a KMS. logger may be nil (slog's
// default).
func OpenAnalytics(ctx context.Context, ep Endpoints, logger *slog.Logger) (*analytics.Store, error) {
	client, err := dynamoclient.New(ctx, dynamoConfig(ep))
	if err != nil {
		return nil, err
	}
	keys, err := OpenKeyStore(ctx, ep, logger)
	if err != nil {
		return nil, fmt.Errorf("analytics users' keys: %w", err)
	}
	return analytics.New(analytics.Config{Client: client, Table: ep.AnalyticsTable, Keys: keys, Logger: logger})
}

// OpenKeyStore returns the data subjects' key store of ep (package
// privacy): the keys table ep.KeysTable on ep's DynamoDB, its data keys
// made and unwrapped by the KMS at ep.KMS under ep.KMSKeyID. logger may
// be nil (slog's default).
func OpenKeyStore(ctx context.Context, ep Endpoints, logger *slog.Logger) (*privacy.KeyStore, error) {
	if err := ep.ValidateKMS(); err != nil {
		return nil, err
	}
	db, err := dynamoclient.New(ctx, dynamoConfig(ep))
	if err != nil {
		return nil, err
	}
	k, err := kmsclient.New(ctx, ep.KMSClient())
	if err != nil {
		return nil, err
	}
	return privacy.NewKeyStore(privacy.KeyStoreConfig{DB: db, Table: ep.KeysTable, KMS: privacy.AWSKMS{Client: k}, KeyID: ep.KMSKeyID, Logger: logger})
}

// Environment variables of the deployment's command key (see
// WriteSideConfig.CommandKey): a file holding it (preferred: it stays out
// of the process list and the environment of children), or the key
// itself.
const (
	EnvCommandKey     = "EVENTPIPE_COMMAND_KEY"
	EnvCommandKeyFile = EnvCommandKey + secretenv.FileSuffix
)

// CommandKeyFromEnv returns the command key of EVENTPIPE_COMMAND_KEY_FILE
// (the file's contents, surrounding white space trimmed) or
// EVENTPIPE_COMMAND_KEY, nil when neither is set. A key shorter than
// commands.MinKeyLength bytes, or both variables set, is an
// *eventstore.ValidationError. Generate one with `openssl rand -hex 32`.
func CommandKeyFromEnv() ([]byte, error) {
	key, err := secretenv.Lookup(os.LookupEnv, EnvCommandKey)
	if err != nil {
		return nil, fmt.Errorf("command key: %w", err)
	}
	if key == "" {
		return nil, nil
	}
	if len(key) < commands.MinKeyLength {
		return nil, &eventstore.ValidationError{Field: "command key", Reason: fmt.Sprintf("has %d bytes, want at least %d (openssl rand -hex 32)", len(key), commands.MinKeyLength)}
	}
	return []byte(key), nil
}

// Environment variables of signed commands on the bus (docs/security.md,
// "Verified actors on the bus"):
//   - EVENTPIPE_COMMAND_PRODUCER_KEYS(_FILE): the producers' keys the
//     command handlers verify with, one "<key id> <key>" a line
//     (WriteSideConfig.ProducerKeys, ProducerKeysFromEnv);
//   - EVENTPIPE_REQUIRE_SIGNED_COMMANDS=true: refuse unsigned commands
//     (WriteSideConfig.RequireSignedCommands);
//   - EVENTPIPE_COMMAND_SIGNING_KEY_ID and
//     EVENTPIPE_COMMAND_SIGNING_KEY(_FILE): the producer key a sender
//     signs with (SenderConfig.Signer, SignerFromEnv).
const (
	EnvCommandProducerKeys   = "EVENTPIPE_COMMAND_PRODUCER_KEYS"
	EnvRequireSignedCommands = "EVENTPIPE_REQUIRE_SIGNED_COMMANDS"
	EnvCommandSigningKeyID   = "EVENTPIPE_COMMAND_SIGNING_KEY_ID"
	EnvCommandSigningKey     = "EVENTPIPE_COMMAND_SIGNING_KEY"
)

// ProducerKeysFromEnv returns the producer keys of
// EVENTPIPE_COMMAND_PRODUCER_KEYS_FILE or EVENTPIPE_COMMAND_PRODUCER_KEYS
// (commands.ParseKeys), nil when neither is set. A malformed line, a
// short key or both variables set is an *eventstore.ValidationError that
// names the variable and the line, never a key.
func ProducerKeysFromEnv() (commands.Keys, error) {
	text, err := secretenv.Lookup(os.LookupEnv, EnvCommandProducerKeys)
	if err != nil || text == "" {
		return nil, err
	}
	keys, err := commands.ParseKeys(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvCommandProducerKeys, err)
	}
	return keys, nil
}

// RequireSignedCommandsFromEnv reads EVENTPIPE_REQUIRE_SIGNED_COMMANDS
// (true or false; unset: false).
func RequireSignedCommandsFromEnv() (bool, error) {
	v, ok := os.LookupEnv(EnvRequireSignedCommands)
	if !ok || v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, &eventstore.ValidationError{Field: EnvRequireSignedCommands, Reason: fmt.Sprintf("%q is not true or false", v)}
	}
	return b, nil
}

// SignerFromEnv returns the signer of EVENTPIPE_COMMAND_SIGNING_KEY_ID and
// EVENTPIPE_COMMAND_SIGNING_KEY_FILE (or …_KEY): the zero Signer when no
// key is set; a key without an id (or an id without a key), a short key
// or a bad id is an *eventstore.ValidationError.
func SignerFromEnv() (commands.Signer, error) { return SignerFromEnvWithID("") }

// SignerFromEnvWithID is SignerFromEnv with the key id keyID instead of
// EVENTPIPE_COMMAND_SIGNING_KEY_ID's, unless keyID is empty (`send
// --key-id`).
func SignerFromEnvWithID(keyID string) (commands.Signer, error) {
	key, err := secretenv.Lookup(os.LookupEnv, EnvCommandSigningKey)
	if err != nil {
		return commands.Signer{}, fmt.Errorf("command signing key: %w", err)
	}
	id := keyID
	if id == "" {
		id = os.Getenv(EnvCommandSigningKeyID)
	}
	switch {
	case key == "" && id == "":
		return commands.Signer{}, nil
	case key == "":
		return commands.Signer{}, &eventstore.ValidationError{Field: EnvCommandSigningKey, Reason: "is not set (nor its _FILE) but " + EnvCommandSigningKeyID + " is"}
	case id == "":
		return commands.Signer{}, &eventstore.ValidationError{Field: EnvCommandSigningKeyID, Reason: "is not set: say which producer key signs"}
	}
	s := commands.Signer{KeyID: id, Key: []byte(key)}
	if err := s.Validate(); err != nil {
		return commands.Signer{}, fmt.Errorf("command signing key: %w", err)
	}
	return s, nil
}
