package eventpipe

import (
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/sagas"
)

// AddSaga registers the saga d (package sagas); NewConsumers runs it
// under the consumer name SagaConsumer(d.SagaName()). An invalid saga or
// a name registered twice is an error.
func (c *Catalog) AddSaga(d sagas.Definition) error {
	if d == nil {
		return fmt.Errorf("eventpipe: saga is nil")
	}
	if err := d.Validate(); err != nil {
		return fmt.Errorf("eventpipe: saga: %w", err)
	}
	if _, dup := c.sagas[d.SagaName()]; dup {
		return fmt.Errorf("eventpipe: saga %q registered twice", d.SagaName())
	}
	c.sagas[d.SagaName()] = d
	return nil
}

// SagaNames returns the names of the registered sagas, sorted.
func (c *Catalog) SagaNames() []string { return sortedKeys(c.sagas) }

// SagaConsumer is the consumer name under which NewConsumers (and
// `eventpipe consume`) runs the saga called name: <name>-saga.
func SagaConsumer(name string) string { return name + "-saga" }

// sagaByConsumer returns the saga that consumer names.
func (c *Catalog) sagaByConsumer(consumer string) (sagas.Definition, bool) {
	for name, d := range c.sagas {
		if SagaConsumer(name) == consumer {
			return d, true
		}
	}
	return nil, false
}

// newSagaRunner builds the Runner of saga d for NewConsumers: state in
// db, commands and cancelled answers through pub, cancels recorded in
// the event store (outcomes).
func newSagaRunner(cfg ConsumersConfig, d sagas.Definition, db *pgxpool.Pool, outcomes commands.OutcomeRecorder, pub message.Publisher) (*sagas.Runner, error) {
	sc := sagas.Config{Saga: d, DB: db, Publisher: pub, Outcomes: outcomes, NewSubscriber: cfg.NewSubscriber,
		Brokers: cfg.Endpoints.KafkaBrokers, Topics: bus.Topics{Prefix: cfg.Endpoints.TopicPrefix}, Logger: cfg.Logger}
	if cfg.Registerer != nil {
		sc.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"saga": d.SagaName()}, cfg.Registerer)
	}
	return sagas.New(sc)
}
