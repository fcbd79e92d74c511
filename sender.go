package eventpipe

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ThreeDotsLabs/watermill"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
)

// NewCommand returns a command of commandType for the aggregate id with
// payload (a JSON object), addressed to the aggregate type whose domain
// takes commandType, with a fresh command id. An unknown command type
// wraps commands.ErrUnknownCommand; a command that fails Validate returns
// its *eventstore.ValidationError.
func (c *Catalog) NewCommand(commandType, aggregateID string, payload json.RawMessage) (commands.Command, error) {
	aggregateType, ok := c.AggregateTypeOf(commandType)
	if !ok {
		return commands.Command{}, fmt.Errorf("%w %q (known: %v)", commands.ErrUnknownCommand, commandType, c.CommandTypes())
	}
	cmd := commands.New(commandType, aggregateType, aggregateID, payload)
	if err := cmd.Validate(); err != nil {
		return commands.Command{}, err
	}
	return cmd, nil
}

// SenderConfig configures NewSender.
type SenderConfig struct {
	// Process: the endpoints (the Kafka brokers and the topic prefix,
	// and the KMS and keys table when the catalogue's commands carry
	// personal data; see Process), the catalogue and the logger, which
	// receives the Kafka client's logs (default: none, unlike the other
	// processes). When the catalogue declares personal data in command
	// payloads (commands.Domain.PersonalCommands), the sender seals it
	// before a command leaves (OpenSealer), unless Sealer is set. Build
	// the commands with Catalog.NewCommand.
	Process
	// Sealer seals the personal data of the commands' payloads (default:
	// OpenSealer of the catalogue, when it declares any).
	Sealer eventstore.CommandSealer
	// ReplyPartition pins the partition of the replies topic the sender
	// reads its answers on (default: one picked at random on first use;
	// see bus/kafka.SenderConfig.ReplyPartition and docs/commands.md).
	ReplyPartition *int32
	// Signer signs the commands sent with a producer key the command
	// handlers hold, so their actor is recorded as verified, and makes
	// SendAndWait take only the answer signed for the command it sent
	// (see bus/kafka.SenderConfig.Signer and docs/security.md). `send`
	// reads it from EVENTPIPE_COMMAND_SIGNING_KEY_ID and
	// EVENTPIPE_COMMAND_SIGNING_KEY(_FILE) (SignerFromEnv). Zero:
	// unsigned, the actor recorded as claimed.
	Signer commands.Signer
}

// Validate reports, as an *eventstore.ValidationError, the settings from
// the environment that could not be read, no Kafka brokers, a topic
// prefix Kafka refuses and a negative ReplyPartition, the endpoints
// filled (as NewSender fills them).
func (c SenderConfig) Validate() error {
	c.Endpoints = c.Endpoints.Fill()
	if err := c.Process.Validate(); err != nil {
		return err
	}
	if len(c.Endpoints.KafkaBrokers) == 0 {
		return invalid("Endpoints.KafkaBrokers", "none")
	}
	if err := bus.ValidateTopic(bus.Topics{Prefix: c.Endpoints.TopicPrefix}.Replies()); err != nil {
		return invalid("Endpoints.TopicPrefix", err.Error())
	}
	if c.ReplyPartition != nil && *c.ReplyPartition < 0 {
		return invalid("ReplyPartition", fmt.Sprintf("%d is negative", *c.ReplyPartition))
	}
	if err := c.Signer.Validate(); err != nil {
		return invalidErr("Signer", err)
	}
	return nil
}

// NewSender returns a command sender on the Kafka brokers of
// cfg.Endpoints: Send publishes a command onto its commands topic,
// SendAndWait also waits for its answer on the replies topic. Build the
// commands with Catalog.NewCommand. Close it when done.
func NewSender(cfg SenderConfig) (*kafka.Sender, error) {
	cfg.Endpoints = cfg.Endpoints.Fill() // the logger stays as given: none by default
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sender: %w", err)
	}
	var logger watermill.LoggerAdapter = watermill.NopLogger{}
	if cfg.Logger != nil {
		logger = watermill.NewSlogLogger(cfg.Logger)
	}
	sealer := cfg.Sealer
	if sealer == nil && cfg.Catalog != nil && len(cfg.Catalog.PersonalCommands()) > 0 {
		s, err := OpenSealer(context.Background(), cfg.Endpoints, cfg.Catalog, cfg.Logger)
		if err != nil {
			return nil, fmt.Errorf("sender: %w", err)
		}
		sealer = s
	}
	return kafka.NewSender(kafka.SenderConfig{
		Brokers: cfg.Endpoints.KafkaBrokers, Security: cfg.Endpoints.Kafka, Topics: bus.Topics{Prefix: cfg.Endpoints.TopicPrefix},
		ReplyPartition: cfg.ReplyPartition, Signer: cfg.Signer, Sealer: sealer, Logger: logger,
	})
}
