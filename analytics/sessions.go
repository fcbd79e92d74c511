package analytics

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/oklog/ulid/v2"
	"golang.org/x/sync/errgroup"

	"github.com/eventpipe/eventpipe/internal/ddbattr"
)

// SessionEvents returns every stored event of a session in ULID order
// (AP2). It queries each of the Config.Shards shards of the source, at
// most Config.QueryConcurrency at a time, filtering on the session id, and
// merges the results: it reads every event of the source that DynamoDB
// still holds and returns all of the session's, so it is for debugging
// and recounts, not for dashboards or the HTTP API (which pages with
// SessionEventsPage). A
// session with no events gives an empty slice. The first failing query
// cancels the others and is returned.
func (s *Store) SessionEvents(ctx context.Context, sourceID, sessionID string) ([]Event, error) {
	wrap := func(err error) error { return fmt.Errorf("events of session %s/%s: %w", sourceID, sessionID, err) }
	if err := validSessionRef(sourceID, sessionID); err != nil {
		return nil, wrap(err)
	}
	events, err := s.shardEvents(ctx, sourceID, func(in *dynamodb.QueryInput) {
		in.FilterExpression = aws.String("#sid = :sid")
		in.ExpressionAttributeNames["#sid"] = AttrSessionID
		in.ExpressionAttributeValues[":sid"] = ddbattr.S(sessionID)
	})
	if err != nil {
		return nil, wrap(err)
	}
	return events, nil
}

// SessionEventsPage returns one page of a session's events in ULID order
// (AP2, paged): at most limit events (0: Config.PageSize, at most
// MaxPageSize) after cursor ("" or the next of a previous page of this
// session), and the cursor of the following page, "" after the last one.
// Each page queries every shard of the source, at most
// Config.QueryConcurrency at a time, filtering on the session id, and
// stops reading a shard once it holds more than a page of the session's
// events after the cursor; the merged events are complete and in order,
// and the cursor (the last event id of the page) makes the next page
// start right after it, so paging returns every event once. A bad limit
// or a cursor this listing did not return is a
// *eventstore.ValidationError on "limit" or "cursor".
func (s *Store) SessionEventsPage(ctx context.Context, sourceID, sessionID string, limit int, cursor string) ([]Event, string, error) {
	wrap := func(err error) error { return fmt.Errorf("events of session %s/%s: %w", sourceID, sessionID, err) }
	if err := validSessionRef(sourceID, sessionID); err != nil {
		return nil, "", wrap(err)
	}
	if limit == 0 {
		limit = s.cfg.PageSize
	}
	if limit < 0 || limit > MaxPageSize {
		return nil, "", wrap(invalid("limit", "is %d, want 1–%d", limit, MaxPageSize))
	}
	after, err := sessionCursor(cursor, sessionID)
	if err != nil {
		return nil, "", wrap(err)
	}
	shards := make([][]item, s.cfg.Shards)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.cfg.QueryConcurrency)
	for shard := range shards {
		g.Go(func() error {
			r := keyRange{hashAttr: AttrPK, hash: EventKey(sourceID, shard, "").PK, rangeAttr: AttrSK, prefix: SKEventPrefix}
			if after != "" {
				r.lo, r.hi = after, "~" // '~' sorts after every ULID character
			}
			in := r.query(s.cfg.Table)
			in.FilterExpression = aws.String("#sid = :sid")
			in.ExpressionAttributeNames["#sid"] = AttrSessionID
			in.ExpressionAttributeValues[":sid"] = ddbattr.S(sessionID)
			// Each call evaluates at most a page or 100 items (not 1 MB),
			// so a session that fills a shard is not read far past a page.
			in.Limit = aws.Int32(int32(max(limit+2, 100)))
			// limit+1 after the cursor's own event: one more than a page
			// tells whether there is a next one.
			items, err := s.queryUntil(gctx, in, func(got []item) bool { return len(got) > limit+1 })
			if err != nil {
				return fmt.Errorf("shard %d: %w", shard, err)
			}
			shards[shard] = items
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, "", wrap(err)
	}
	events, err := decodeAll(slices.Concat(shards...), s.eventReader(ctx))
	if err != nil {
		return nil, "", wrap(err)
	}
	// BETWEEN is inclusive: the cursor's own event is read again.
	events = slices.DeleteFunc(events, func(e Event) bool { return e.EventID == after })
	slices.SortFunc(events, func(a, b Event) int { return strings.Compare(a.EventID, b.EventID) })
	if len(events) <= limit {
		return events, "", nil
	}
	events = events[:limit]
	next, err := encodeCursor(item{AttrSessionID: ddbattr.S(sessionID), AttrEventID: ddbattr.S(events[limit-1].EventID)})
	if err != nil {
		return nil, "", wrap(err)
	}
	return events, next, nil
}

// sessionCursor decodes a cursor of SessionEventsPage for sessionID into
// the id of the last event of the previous page ("" for no cursor).
// Anything else is a *eventstore.ValidationError on "cursor".
func sessionCursor(cursor, sessionID string) (string, error) {
	if cursor == "" {
		return "", nil
	}
	bad := invalid("cursor", "is not a cursor of this listing")
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return "", bad
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil || len(m) != 2 || m[AttrSessionID] != sessionID {
		return "", bad
	}
	id, err := ulid.ParseStrict(m[AttrEventID])
	if err != nil || id.String() != m[AttrEventID] {
		return "", bad
	}
	return m[AttrEventID], nil
}

// shardEvents queries the raw events of every shard of a source, at most
// Config.QueryConcurrency at a time, each query adjusted by tune, and
// returns them merged in ULID order. The first failing query cancels the
// others and is returned.
func (s *Store) shardEvents(ctx context.Context, sourceID string, tune func(*dynamodb.QueryInput)) ([]Event, error) {
	shards := make([][]item, s.cfg.Shards)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.cfg.QueryConcurrency)
	for shard := range shards {
		g.Go(func() error {
			r := keyRange{hashAttr: AttrPK, hash: EventKey(sourceID, shard, "").PK, rangeAttr: AttrSK, prefix: SKEventPrefix}
			in := r.query(s.cfg.Table)
			tune(in)
			items, err := s.queryAll(gctx, in)
			if err != nil {
				return fmt.Errorf("shard %d: %w", shard, err)
			}
			shards[shard] = items
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	events, err := decodeAll(slices.Concat(shards...), s.eventReader(ctx))
	if err != nil {
		return nil, err
	}
	slices.SortFunc(events, func(a, b Event) int { return strings.Compare(a.EventID, b.EventID) })
	return events, nil
}

// Session reads one session (AP3, a strongly consistent GetItem); ok is
// false when there is none.
func (s *Store) Session(ctx context.Context, sourceID, sessionID string) (Session, bool, error) {
	wrap := func(err error) error { return fmt.Errorf("session %s/%s: %w", sourceID, sessionID, err) }
	if err := validSessionRef(sourceID, sessionID); err != nil {
		return Session{}, false, wrap(err)
	}
	out, err := s.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.cfg.Table),
		Key:            SessionKey(sourceID, sessionID).Attributes(),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Session{}, false, wrap(err)
	}
	if len(out.Item) == 0 {
		return Session{}, false, nil
	}
	sess, err := s.sessionReader(ctx)(out.Item)
	if err != nil {
		return Session{}, false, wrap(err)
	}
	return sess, true, nil
}

// RecentSessions lists a source's sessions by descending session id
// (AP4): the most recent first when session ids are time-ordered (ULIDs),
// otherwise simply in reverse id order. limit 0 means Config.PageSize;
// cursor is "" or the next of a previous page of this source, and next is
// "" after the last page (a page may be empty with a next that leads
// nowhere).
func (s *Store) RecentSessions(ctx context.Context, sourceID string, limit int, cursor string) ([]Session, string, error) {
	if err := validSource(sourceID); err != nil {
		return nil, "", fmt.Errorf("sessions of %s: %w", sourceID, err)
	}
	r := keyRange{hashAttr: AttrPK, hash: SourceKey(sourceID), rangeAttr: AttrSK, prefix: SKSessionPrefix, descending: true}
	return listPage(ctx, s, r, limit, cursor, s.sessionReader(ctx), "sessions of "+sourceID)
}

// UserSessions lists a user's sessions across sources by descending
// session id (AP5) from gsi1, paged as RecentSessions. Only sessions
// with a user are in the index; it is eventually consistent.
func (s *Store) UserSessions(ctx context.Context, userID string, limit int, cursor string) ([]Session, string, error) {
	if err := validID("userId", userID, MaxIDBytes, false); err != nil {
		return nil, "", fmt.Errorf("sessions of user %s: %w", userID, err)
	}
	r := keyRange{index: IndexByUser, hashAttr: AttrGSI1PK, hash: UserKey(userID), rangeAttr: AttrGSI1SK, prefix: SKSessionPrefix, descending: true}
	return listPage(ctx, s, r, limit, cursor, s.sessionReader(ctx), "sessions of user "+userID)
}

// listPage reads and decodes one page of r.
func listPage[T any](ctx context.Context, s *Store, r keyRange, limit int, cursor string, decode func(item) (T, error), what string) ([]T, string, error) {
	items, next, err := s.page(ctx, r, limit, cursor)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", what, err)
	}
	out, err := decodeAll(items, decode)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", what, err)
	}
	return out, next, nil
}

func validSessionRef(sourceID, sessionID string) error {
	if err := validSource(sourceID); err != nil {
		return err
	}
	if err := validID("sessionId", sessionID, MaxIDBytes, false); err != nil {
		return err
	}
	return nil
}
