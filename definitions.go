package eventpipe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/projections"
)

// Definition is what a consumer is, as recorded each time it starts
// (RecordDefinitions) and compared with what it was before: the topics it
// reads, the event types it applies, its declared version and its
// schema's fingerprint. A change is logged at the start that makes it and
// shown by `eventpipe status` until the next one.
type Definition struct {
	Kind        ConsumerKind `json:"kind"`
	Topics      []string     `json:"topics,omitempty"`
	TopicPrefix string       `json:"topic_prefix,omitempty"`
	EventTypes  []string     `json:"event_types,omitempty"`
	Version     int          `json:"version,omitempty"`
	Fingerprint string       `json:"fingerprint,omitempty"`
}

// DefinitionOf is the definition of cons in the topic namespace t, its
// lists sorted.
func DefinitionOf(cons Consumer, t bus.Topics) Definition {
	info := cons.Describe(t)
	return Definition{Kind: info.Kind, Topics: sortedCopy(info.Topics), TopicPrefix: info.TopicPrefix,
		EventTypes: sortedCopy(info.EventTypes), Version: info.Version, Fingerprint: info.Fingerprint}
}

func sortedCopy(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return slices.Sorted(slices.Values(s))
}

// Changes lists, in words, what differs from prev to d: topics and event
// types added or removed, the version, the schema. None when they are
// the same.
func (d Definition) Changes(prev Definition) []string {
	var out []string
	diff := func(what string, before, after []string) {
		var added, removed []string
		for _, s := range after {
			if !slices.Contains(before, s) {
				added = append(added, s)
			}
		}
		for _, s := range before {
			if !slices.Contains(after, s) {
				removed = append(removed, s)
			}
		}
		if len(added) > 0 {
			out = append(out, what+" added: "+strings.Join(added, ", "))
		}
		if len(removed) > 0 {
			out = append(out, what+" removed: "+strings.Join(removed, ", "))
		}
	}
	if d.Kind != prev.Kind {
		out = append(out, fmt.Sprintf("kind %s → %s", prev.Kind, d.Kind))
	}
	diff("topics", prev.Topics, d.Topics)
	if d.TopicPrefix != prev.TopicPrefix {
		out = append(out, fmt.Sprintf("topic prefix %q → %q", prev.TopicPrefix, d.TopicPrefix))
	}
	diff("event types", prev.EventTypes, d.EventTypes)
	if d.Version != prev.Version {
		out = append(out, fmt.Sprintf("version %d → %d", prev.Version, d.Version))
	}
	if d.Fingerprint != prev.Fingerprint {
		out = append(out, "schema changed")
	}
	return out
}

// RecordedDefinition is a consumer's definition as recorded at its last
// start, with the one it replaced when that start changed it.
type RecordedDefinition struct {
	Definition Definition
	// RecordedAt is the last start that recorded it.
	RecordedAt time.Time
	// Previous is the definition before the last change, and ChangedAt
	// when the change was recorded; nil and zero when it never changed.
	Previous  *Definition
	ChangedAt time.Time
}

// Changes is what the last change changed (Definition.Changes), none
// when the definition never changed.
func (r RecordedDefinition) Changes() []string {
	if r.Previous == nil {
		return nil
	}
	return r.Definition.Changes(*r.Previous)
}

// RecordDefinitions records the definition of each consumer of names in
// the catalogue (DefinitionOf) in db's consumer_definitions (migration
// 013): a definition unlike the recorded one replaces it, the old one
// kept as the previous, and the change is logged. NewConsumers calls it
// when it has the read-model database.
func RecordDefinitions(ctx context.Context, db *pgxpool.Pool, cat *Catalog, t bus.Topics, names []string, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.Default()
	}
	for _, name := range names {
		cons, ok := cat.Consumer(name)
		if !ok {
			return fmt.Errorf("record the definition of %q: %w", name, ErrUnknownConsumer)
		}
		def := DefinitionOf(cons, t)
		body, err := json.Marshal(def)
		if err != nil {
			return err
		}
		var prev []byte
		err = db.QueryRow(ctx, `WITH old AS (SELECT definition FROM consumer_definitions WHERE consumer = $1 FOR UPDATE)
			INSERT INTO consumer_definitions (consumer, definition) VALUES ($1, $2)
			ON CONFLICT (consumer) DO UPDATE SET
				previous   = CASE WHEN consumer_definitions.definition = EXCLUDED.definition THEN consumer_definitions.previous ELSE consumer_definitions.definition END,
				changed_at = CASE WHEN consumer_definitions.definition = EXCLUDED.definition THEN consumer_definitions.changed_at ELSE now() END,
				definition = EXCLUDED.definition, recorded_at = now()
			RETURNING (SELECT definition FROM old)`, name, body).Scan(&prev)
		if err != nil {
			return fmt.Errorf("record the definition of consumer %s: %w", name, err)
		}
		if prev == nil {
			continue
		}
		var old Definition
		if err := json.Unmarshal(prev, &old); err != nil {
			return fmt.Errorf("read the recorded definition of consumer %s: %w", name, err)
		}
		if changes := def.Changes(old); len(changes) > 0 {
			logger.InfoContext(ctx, "consumer definition changed since its last start", "consumer", name, "changes", changes)
		}
	}
	return nil
}

// ReadDefinitions returns the recorded definition of every consumer in
// db, by name.
func ReadDefinitions(ctx context.Context, db *pgxpool.Pool) (map[string]RecordedDefinition, error) {
	rows, err := db.Query(ctx, `SELECT consumer, definition, recorded_at, previous, changed_at FROM consumer_definitions`)
	if err != nil {
		return nil, fmt.Errorf("consumer definitions: %w", err)
	}
	out := map[string]RecordedDefinition{}
	defer rows.Close()
	for rows.Next() {
		var (
			name       string
			def, prev  []byte
			recordedAt time.Time
			changedAt  *time.Time
		)
		if err := rows.Scan(&name, &def, &recordedAt, &prev, &changedAt); err != nil {
			return nil, fmt.Errorf("consumer definitions: %w", err)
		}
		r := RecordedDefinition{RecordedAt: recordedAt}
		if err := json.Unmarshal(def, &r.Definition); err != nil {
			return nil, fmt.Errorf("consumer definition of %s: %w", name, err)
		}
		if prev != nil {
			r.Previous = &Definition{}
			if err := json.Unmarshal(prev, r.Previous); err != nil {
				return nil, fmt.Errorf("previous consumer definition of %s: %w", name, err)
			}
		}
		if changedAt != nil {
			r.ChangedAt = *changedAt
		}
		out[name] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("consumer definitions: %w", err)
	}
	return out, nil
}

// readModelFingerprint hashes a read model's tables and its own
// migrations (projections.Migrator): what its rows are shaped by.
func readModelFingerprint(p projections.Projection) string {
	h := sha256.New()
	if r, ok := p.(projections.Rebuildable); ok {
		for _, t := range sortedCopy(r.Tables()) {
			fmt.Fprintf(h, "table %s\n", t)
		}
	}
	if m, ok := p.(projections.Migrator); ok {
		fsys := m.Migrations()
		_ = fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := fs.ReadFile(fsys, path)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "migration %s %d\n", path, len(b))
			h.Write(b)
			return nil
		})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// jsonFingerprint hashes v's JSON (maps encode with sorted keys).
func jsonFingerprint(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

// isUndefinedTable reports whether err is Postgres' "relation does not
// exist" (a database `eventpipe migrate` has not brought up to date).
func isUndefinedTable(err error) bool {
	var pgErr interface{ SQLState() string }
	return errors.As(err, &pgErr) && pgErr.SQLState() == "42P01"
}
