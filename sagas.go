package eventpipe

import (
	"fmt"

	"github.com/eventpipe/eventpipe/sagas"
)

// AddSaga registers the saga d (package sagas) as a consumer (Saga)
// named SagaConsumer(d.SagaName()), which no other consumer of any kind
// may hold (a *NameTakenError). An invalid saga is an error.
func (c *Catalog) AddSaga(d sagas.Definition) error {
	if d == nil {
		return fmt.Errorf("eventpipe: saga is nil")
	}
	if err := d.Validate(); err != nil {
		return fmt.Errorf("eventpipe: saga: %w", err)
	}
	if err := c.AddConsumer(Saga(d)); err != nil {
		return err
	}
	c.sagas[d.SagaName()] = d
	return nil
}

// Saga returns the saga registered under name (its SagaName).
func (c *Catalog) Saga(name string) (sagas.Definition, bool) {
	d, ok := c.sagas[name]
	return d, ok
}

// SagaNames returns the names of the registered sagas, sorted.
func (c *Catalog) SagaNames() []string { return sortedKeys(c.sagas) }

// SagaConsumer is the consumer name under which NewConsumers (and
// `eventpipe consume`) runs the saga called name: <name>-saga.
func SagaConsumer(name string) string { return name + "-saga" }
