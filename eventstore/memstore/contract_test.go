package memstore_test

import (
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/eventstore/memstore"
	"github.com/eventpipe/eventpipe/eventstore/storetest"
)

// TestContract runs the store contract suite against the memory store.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, schema eventstore.Schema) storetest.Subject {
		s, err := memstore.New(memstore.Config{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		return storetest.Subject{Store: s, Outbound: s.Outbound}
	})
}
