package elastic

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/privacy/subjects"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
)

// Scrubber is a Projection whose documents hold a data subject's
// personal data in clear (docs/privacy.md). It lists
// subjects.AggregateType among its AggregateTypes and
// subjects.SubjectForgotten among its EventTypes; on that event the
// Applier rewrites the document of each of the subject's aggregates of
// the projection's types through Scrub.
type Scrubber interface {
	Projection
	// Scrub returns doc with the personal data forgotten (each field
	// privacy.ForgottenText, say).
	Scrub(doc json.RawMessage) (json.RawMessage, error)
}

// splitForgotten takes the SubjectForgotten events out of events.
func splitForgotten(events []eventstore.Envelope) (rest, forgotten []eventstore.Envelope) {
	for _, e := range events {
		if e.AggregateType == subjects.AggregateType && e.EventType == subjects.SubjectForgotten {
			forgotten = append(forgotten, e)
		} else {
			rest = append(rest, e)
		}
	}
	if len(forgotten) == 0 {
		return events, nil
	}
	return rest, forgotten
}

// scrub rewrites, through s, the documents of the aggregates the
// SubjectForgotten events name, each at its own version (external_gte:
// its position does not move), and returns how many events it applied.
// A document that moved on meanwhile fails the call, to be retried.
func (a *Applier) scrub(ctx context.Context, s Scrubber, forgotten []eventstore.Envelope) (int, error) {
	name := a.Name()
	var refs []eventstore.Ref
	for _, e := range forgotten {
		f, err := subjects.SubjectForgottenEvent.Decode(e)
		if err != nil {
			return 0, fmt.Errorf("elastic: %s: %w", name, err)
		}
		for t := range a.wants {
			for _, id := range subjects.IDsOf(f.Scopes, t) {
				refs = append(refs, eventstore.Ref{Type: t, ID: id})
			}
		}
	}
	if len(refs) == 0 {
		return len(forgotten), nil
	}
	for _, ref := range refs {
		if a.cache != nil {
			a.cache.Remove(ref.ID)
		}
	}
	docs, err := a.read(ctx, refs)
	if err != nil {
		return 0, err
	}
	var body bytes.Buffer
	n := 0
	for id, d := range docs {
		doc, err := s.Scrub(d.source)
		if err != nil {
			return 0, fmt.Errorf("elastic: %s: scrub %s: %w", name, id, err)
		}
		action, _ := json.Marshal(map[string]any{"index": map[string]any{"_id": id, "version": d.version, "version_type": "external_gte"}})
		body.Write(action)
		body.WriteByte('\n')
		if err := json.Compact(&body, doc); err != nil {
			return 0, fmt.Errorf("elastic: %s: %s: the scrubbed document is not JSON: %w", name, id, err)
		}
		body.WriteByte('\n')
		n++
	}
	if n == 0 {
		return len(forgotten), nil
	}
	items, err := a.bulk(ctx, &body)
	if err != nil {
		return 0, fmt.Errorf("elastic: %s: scrub %d documents: %w", name, n, err)
	}
	for _, it := range items {
		if it.Status < 200 || it.Status >= 300 {
			re := &esclient.ResponseError{Status: it.Status}
			if it.Error != nil {
				re.Type, re.Reason = it.Error.Type, it.Error.Reason
			}
			if it.Status == http.StatusConflict {
				return 0, fmt.Errorf("elastic: %s: scrub %s: the document moved on meanwhile (retried): %w", name, it.ID, re)
			}
			return 0, fmt.Errorf("elastic: %s: scrub %s: %w", name, it.ID, re)
		}
	}
	a.cfg.Logger.InfoContext(ctx, "scrubbed a forgotten subject's documents", "projection", name, "documents", n)
	return len(forgotten), nil
}
