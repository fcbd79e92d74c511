package bus

import (
	"fmt"
	"strings"
	"time"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Start says where a consumer group begins on a topic it has never
// committed an offset on: every topic at the group's first deployment, a
// topic added to it at the deployment that adds it. Once the group has
// committed on a topic, it resumes there where it stopped, whatever its
// Start. The zero Start is "the consumer kind's default".
type Start struct {
	kind startKind
	at   time.Time
}

type startKind int

const (
	startDefault startKind = iota
	startHistory
	startEarliest
	startLatest
	startAt
)

var (
	// StartHistory: a read or search model first catches up from the
	// event store's history, durably and resumably, then follows the
	// live topics from a margin before its catch-up began. The default
	// of read and search models; a consumer that cannot read the store
	// refuses it.
	StartHistory = Start{kind: startHistory}
	// StartEarliest: the oldest record the topics still hold (records
	// past the topics' retention are gone: only StartHistory sees them).
	StartEarliest = Start{kind: startEarliest}
	// StartLatest: only records published after the group first started
	// (on a topic added later: after the deployment that added it).
	// The default of consumers with side effects (sagas, plain handlers):
	// they never act on what happened before they were deployed.
	StartLatest = Start{kind: startLatest}
)

// StartAt starts at the first record published at or after t (Kafka
// ListOffsets by timestamp).
func StartAt(t time.Time) Start { return Start{kind: startAt, at: t} }

// IsDefault reports the zero Start: the consumer kind picks.
func (s Start) IsDefault() bool { return s.kind == startDefault }

// IsHistory reports StartHistory.
func (s Start) IsHistory() bool { return s.kind == startHistory }

// IsEarliest reports StartEarliest.
func (s Start) IsEarliest() bool { return s.kind == startEarliest }

// IsLatest reports StartLatest.
func (s Start) IsLatest() bool { return s.kind == startLatest }

// Time returns StartAt's time and true, or false for the other starts.
func (s Start) Time() (time.Time, bool) { return s.at, s.kind == startAt }

// Or returns s, or def when s is the zero Start.
func (s Start) Or(def Start) Start {
	if s.IsDefault() {
		return def
	}
	return s
}

// String is what ParseStart reads back: history, earliest, latest, an
// RFC 3339 time, or "default".
func (s Start) String() string {
	switch s.kind {
	case startHistory:
		return "history"
	case startEarliest:
		return "earliest"
	case startLatest:
		return "latest"
	case startAt:
		return s.at.UTC().Format(time.RFC3339Nano)
	}
	return "default"
}

// ParseStart reads a Start: "history", "earliest", "latest", an RFC 3339
// time (2026-11-25T10:00:00Z), or "" / "default" for the kind's default.
// Anything else is an *eventstore.ValidationError on field "start".
func ParseStart(s string) (Start, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "default":
		return Start{}, nil
	case "history":
		return StartHistory, nil
	case "earliest", "oldest":
		return StartEarliest, nil
	case "latest", "newest":
		return StartLatest, nil
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s))
	if err != nil {
		return Start{}, &eventstore.ValidationError{Field: "start",
			Reason: fmt.Sprintf("%q is not history, earliest, latest or an RFC 3339 time such as 2026-11-25T10:00:00Z", s)}
	}
	return StartAt(t), nil
}
