package analytics

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/ddbattr"
	"github.com/eventpipe/eventpipe/privacy"
	"github.com/eventpipe/eventpipe/rollup"
)

type item = map[string]types.AttributeValue

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// eventItem is the item of e; props is its properties as JSON (nil when
// it has none).
func eventItem(e Event, props []byte) item {
	k := EventKey(e.SourceID, e.Shard, e.EventID)
	it := item{
		AttrPK:        ddbattr.S(k.PK),
		AttrSK:        ddbattr.S(k.SK),
		AttrSourceID:  ddbattr.S(e.SourceID),
		AttrShard:     ddbattr.N(int64(e.Shard)),
		AttrEventID:   ddbattr.S(e.EventID),
		AttrType:      ddbattr.S(e.Type),
		AttrSessionID: ddbattr.S(e.SessionID),
		AttrCreatedAt: ddbattr.S(formatTime(e.CreatedAt)),
		AttrTTL:       ddbattr.N(e.ExpiresAt.Unix()),
	}
	ddbattr.SetOpt(it, AttrUserID, e.UserID)
	ddbattr.SetOpt(it, AttrURL, e.URL)
	ddbattr.SetOpt(it, AttrReferrer, e.Referrer)
	ddbattr.SetOpt(it, AttrUserAgent, e.UserAgent)
	ddbattr.SetOpt(it, AttrActor, e.Actor)
	ddbattr.SetOpt(it, AttrProperties, string(props))
	return it
}

func decodeEvent(it item) (Event, error) {
	d := decoder{it: it}
	e := Event{
		SourceID:  d.s(AttrSourceID),
		Shard:     int(d.n(AttrShard)),
		EventID:   d.s(AttrEventID),
		Type:      d.s(AttrType),
		SessionID: d.s(AttrSessionID),
		UserID:    d.s(AttrUserID),
		URL:       d.s(AttrURL),
		Referrer:  d.s(AttrReferrer),
		UserAgent: d.s(AttrUserAgent),
		Actor:     d.s(AttrActor),
		CreatedAt: d.time(AttrCreatedAt),
		ExpiresAt: d.unix(AttrTTL),
	}
	if p := d.s(AttrProperties); strings.HasPrefix(p, privacy.SealedPrefix) {
		e.SealedProperties = p
	} else if p != "" && d.err == nil {
		var err error
		if e.Properties, err = decodeProperties(p); err != nil {
			d.fail(AttrProperties, err.Error())
		}
	}
	return e, d.result("event")
}

func decodeSession(it item) (Session, error) {
	d := decoder{it: it}
	s := Session{
		SourceID:        d.keyPart(AttrPK, prefixSource),
		SessionID:       d.keyPart(AttrSK, SKSessionPrefix),
		UserID:          d.s(AttrUserID),
		EventCount:      d.n(AttrEventCount),
		EntryURL:        d.s(AttrEntryURL),
		ExitURL:         d.s(AttrExitURL),
		FirstSeenAt:     d.time(AttrFirstSeenAt),
		LastSeenAt:      d.time(AttrLastSeenAt),
		DurationSeconds: d.n(AttrDuration),
		ExpiresAt:       d.unix(AttrTTL),
	}
	return s, d.result("session")
}

func decodeAggregation(it item) (Aggregation, error) {
	d := decoder{it: it}
	a := Aggregation{
		SourceID:  d.keyPart(AttrPK, prefixSource),
		Events:    d.n(AttrEvents),
		PageViews: d.n(AttrPageViews),
		Sessions:  d.n(AttrSessions),
	}
	period, bucket, _ := strings.Cut(d.keyPart(AttrSK, SKAggregationPrefix), "#")
	a.Period, a.Bucket = Period(period), bucket
	if !a.Period.Valid() {
		d.fail(AttrSK, fmt.Sprintf("has period %q, want hourly or daily", period))
	} else if start, err := a.Period.Parse(bucket); err != nil {
		d.fail(AttrSK, fmt.Sprintf("bucket %q is not a %s bucket", bucket, period))
	} else {
		a.Start = start
	}
	var sketches [][]byte
	for name := range it {
		switch {
		case strings.HasPrefix(name, AttrPerTypePrefix):
			if a.PerType == nil {
				a.PerType = map[string]int64{}
			}
			a.PerType[strings.TrimPrefix(name, AttrPerTypePrefix)] = d.n(name)
		case strings.HasPrefix(name, AttrUsersPrefix):
			sketches = append(sketches, d.b(name))
		}
	}
	if d.err == nil {
		merged, err := rollup.MergeSketches(sketches...)
		if err != nil {
			d.fail(AttrUsersPrefix+"*", err.Error())
		} else {
			a.UniqueUsers = int64(merged.Estimate())
			if len(sketches) > 0 {
				a.UsersSketch, _ = merged.MarshalBinary()
			}
		}
	}
	return a, d.result("aggregation")
}

// decoder reads an item's attributes. A missing attribute reads as the
// zero value; the first one of an unexpected type or format is kept in
// err.
type decoder struct {
	it  item
	err *eventstore.DecodeError
}

func (d *decoder) fail(name, reason string) {
	if d.err == nil {
		d.err = &eventstore.DecodeError{Field: "attribute " + name, Reason: reason}
	}
}

// result is the *eventstore.DecodeError of the first attribute that
// failed, naming the item (what, pk/sk), or nil.
func (d *decoder) result(what string) error {
	if d.err == nil {
		return nil
	}
	d.err.What = fmt.Sprintf("%s item %s/%s", what, d.raw(AttrPK), d.raw(AttrSK))
	return d.err
}

func (d *decoder) raw(name string) string {
	if v, ok := d.it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return "?"
}

// get returns the attribute name as a T; ok is false when it is missing
// or of another type (then d.err says so).
func get[T types.AttributeValue](d *decoder, name string) (v T, ok bool) {
	a, present := d.it[name]
	if !present {
		return v, false
	}
	if v, ok = a.(T); !ok {
		d.fail(name, fmt.Sprintf("is %T, want %T", a, v))
	}
	return v, ok
}

func (d *decoder) s(name string) string {
	if v, ok := get[*types.AttributeValueMemberS](d, name); ok {
		return v.Value
	}
	return ""
}

func (d *decoder) n(name string) int64 {
	v, ok := get[*types.AttributeValueMemberN](d, name)
	if !ok {
		return 0
	}
	return d.parseN(name, v.Value)
}

func (d *decoder) parseN(name, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		d.fail(name, fmt.Sprintf("%q is not an integer", s))
	}
	return n
}

func (d *decoder) b(name string) []byte {
	if v, ok := get[*types.AttributeValueMemberB](d, name); ok {
		return bytes.Clone(v.Value)
	}
	return nil
}

// time parses an RFC 3339 string attribute, returning UTC.
func (d *decoder) time(name string) time.Time {
	s := d.s(name)
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		d.fail(name, fmt.Sprintf("%q is not an RFC 3339 time", s))
	}
	return t.UTC()
}

// unix reads a number of Unix seconds (a ttl).
func (d *decoder) unix(name string) time.Time {
	if _, ok := d.it[name]; !ok {
		return time.Time{}
	}
	return time.Unix(d.n(name), 0).UTC()
}

// keyPart is a key attribute with its prefix removed; a key without the
// prefix is an error.
func (d *decoder) keyPart(name, prefix string) string {
	s := d.s(name)
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok {
		d.fail(name, fmt.Sprintf("%q does not start with %s", s, prefix))
	}
	return rest
}

// EventFromItem decodes a raw event item (a GetItem's or Query's item,
// or a stream record's NewImage converted with
// eventstore/dynamodb.ItemFromStreamImage). An item that does not decode
// is a *eventstore.DecodeError.
func EventFromItem(it map[string]types.AttributeValue) (Event, error) { return decodeEvent(it) }
