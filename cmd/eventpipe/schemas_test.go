package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/domains/order"
	"github.com/eventpipe/eventpipe/schemas"
)

// committedSchemas is the snapshot `make test` checks, from this
// package's folder.
const committedSchemas = "../../schemas/events.json"

// runSchemas runs `eventpipe schemas args…` on cat.
func runSchemas(t *testing.T, cat *eventpipe.Catalog, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := schemasCommand(cat)
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.Execute()
	return out.String(), err
}

// fixture writes the committed snapshot, changed by edit, to a file of
// its own and returns its path.
func fixture(t *testing.T, edit func(e *schemas.Event)) string {
	t.Helper()
	data, err := os.ReadFile(committedSchemas)
	if err != nil {
		t.Fatal(err)
	}
	r, err := schemas.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range r.Events {
		edit(&r.Events[i])
	}
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "events.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// shippedHadACarrier is the committed snapshot as if OrderShipped's
// payload had had a "carrier" that the code no longer has: the code
// removed it.
func shippedHadACarrier(e *schemas.Event) {
	if e.Type == order.OrderShipped {
		e.Payload.Fields = append(e.Payload.Fields, schemas.Field{Name: "carrier", Shape: schemas.Shape{Kind: schemas.KindString}})
	}
}

// TestSchemasCheckPassesOnTheCommittedSnapshot: the committed snapshot
// is the built-in catalogue's schemas, exactly (a change to a payload
// type, even one that breaks nothing, must come with the snapshot
// written again), and every built-in event type has a typed definition,
// so that its payload is checked.
func TestSchemasCheckPassesOnTheCommittedSnapshot(t *testing.T) {
	out, err := runSchemas(t, eventpipe.Builtin(), "check", "--file", committedSchemas)
	if err != nil || !strings.Contains(out, "event types: as in "+committedSchemas) {
		t.Fatalf("schemas check: %v\n%s\nwant the snapshot as the code has it (run 'eventpipe schemas write' after a change that passes)", err, out)
	}
	current, err := eventpipe.Builtin().EventSchemas()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range current.Events {
		if e.Payload == nil {
			t.Errorf("%s (%s) has no typed definition (eventstore.DefineEvent): its payload is not checked", e.Type, e.Aggregate)
		}
	}
	if len(current.Events) < 16 {
		t.Errorf("%d event types in the built-in catalogue, want the 16 of its four domains at least", len(current.Events))
	}
}

// TestSchemasCheckFailsOnARemovedFieldOrARenamedType: against snapshots
// in which OrderShipped had a field the code lacks, or OrderShipped was
// called OrderSent, check fails naming the type, the version and the
// field; a field in the code that the snapshot lacks passes.
func TestSchemasCheckFailsOnARemovedFieldOrARenamedType(t *testing.T) {
	_, err := runSchemas(t, eventpipe.Builtin(), "check", "--file", fixture(t, shippedHadACarrier))
	if err == nil || !strings.Contains(err.Error(), "OrderShipped v1: field carrier was removed") {
		t.Fatalf("a removed field: %v", err)
	}
	_, err = runSchemas(t, eventpipe.Builtin(), "check", "--file", fixture(t, func(e *schemas.Event) {
		if e.Type == order.OrderShipped {
			e.Type = "OrderSent"
		}
	}))
	if err == nil || !strings.Contains(err.Error(), "OrderSent v1: is gone from the code (removed or renamed)") {
		t.Fatalf("a renamed type: %v", err)
	}
	out, err := runSchemas(t, eventpipe.Builtin(), "check", "--file", fixture(t, func(e *schemas.Event) {
		if e.Type == order.OrderShipped {
			e.Payload.Fields = e.Payload.Fields[:0] // the code added trackingNumber
		}
	}))
	if err != nil || !strings.Contains(out, "note: OrderShipped v1: field trackingNumber was added") || !strings.Contains(out, "out of date") {
		t.Fatalf("an added field: %v\n%s", err, out)
	}
}

// TestSchemasCheckPassesARemovedFieldWithAnUpcasterAndUpdates: once
// OrderShipped has an upcaster to v2, the field the code removed breaks
// nothing; check --update writes the snapshot at v2, and the check after
// finds it as the code has it.
func TestSchemasCheckPassesARemovedFieldWithAnUpcasterAndUpdates(t *testing.T) {
	cat := eventpipe.Builtin()
	dropCarrier := func(p json.RawMessage) (json.RawMessage, error) {
		var m map[string]any
		if err := json.Unmarshal(p, &m); err != nil {
			return nil, err
		}
		delete(m, "carrier")
		return json.Marshal(m)
	}
	if err := cat.Upcasters().Register(order.OrderShipped, 1, dropCarrier); err != nil {
		t.Fatal(err)
	}
	file := fixture(t, shippedHadACarrier)
	out, err := runSchemas(t, cat, "check", "--update", "--file", file)
	if err != nil || !strings.Contains(out, "note: OrderShipped: v1 → v2 through upcasters; the snapshot has v1") || !strings.Contains(out, file+" written") {
		t.Fatalf("a removed field with an upcaster: %v\n%s", err, out)
	}
	if out, err := runSchemas(t, cat, "check", "--file", file); err != nil || !strings.Contains(out, "as in "+file) {
		t.Fatalf("after --update: %v\n%s", err, out)
	}
	if _, err := runSchemas(t, eventpipe.Builtin(), "check", "--file", file); err == nil || !strings.Contains(err.Error(), "OrderShipped v2: is at v1 in the code") {
		t.Fatalf("the v2 snapshot without the upcaster: %v", err)
	}
}
