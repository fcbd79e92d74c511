package analyticsbus

import (
	"errors"
	"fmt"
	"strings"

	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/eventstore"
	store "github.com/eventpipe/eventpipe/eventstore/dynamodb"
	"github.com/eventpipe/eventpipe/relay"
)

// Translator is the relay's RecordTranslator for the analytics table
// (relay.Config.Translator): an INSERT or MODIFY of a raw event item (sk
// analytics.SKEventPrefix) becomes Message(e) on
// Topics.Analytics(e.SourceID). REMOVEs (TTL expiry) and every other
// item (SESSION#, AGG#, anything unknown) are skipped: ok is false and
// the error nil. A raw event record without a NewImage, or whose image
// is not an event that Decode accepts, is a *eventstore.DecodeError
// naming the record (its stream sequence number and sort key), the
// attribute or field and what is wrong with it; the relay sends it
// to its poison topic. Translator holds no state and is safe for
// concurrent use.
type Translator struct {
	Topics bus.Topics
}

var _ relay.RecordTranslator = Translator{}

// Translate returns the message for rec, ok=false when rec is not
// published, or a *eventstore.DecodeError.
func (t Translator) Translate(rec streamtypes.Record) (out relay.Outgoing, ok bool, err error) {
	if rec.Dynamodb == nil {
		return relay.Outgoing{}, false, &eventstore.DecodeError{What: "stream record", Reason: "record has no dynamodb section"}
	}
	if rec.EventName == streamtypes.OperationTypeRemove {
		return relay.Outgoing{}, false, nil
	}
	sk := stringAttr(rec.Dynamodb.Keys, analytics.AttrSK)
	if sk == "" {
		sk = stringAttr(rec.Dynamodb.NewImage, analytics.AttrSK)
	}
	if !strings.HasPrefix(sk, analytics.SKEventPrefix) {
		return relay.Outgoing{}, false, nil
	}
	// fail names the record in the *eventstore.DecodeError of err (or
	// makes one of err).
	fail := func(err error) (relay.Outgoing, bool, error) {
		seq := ""
		if rec.Dynamodb.SequenceNumber != nil {
			seq = *rec.Dynamodb.SequenceNumber
		}
		de := &eventstore.DecodeError{What: fmt.Sprintf("stream record %s (sk %q)", seq, sk), Reason: err.Error()}
		if inner := (*eventstore.DecodeError)(nil); errors.As(err, &inner) {
			de.Field, de.Reason = inner.Field, inner.Reason
		}
		return relay.Outgoing{}, false, de
	}
	if rec.Dynamodb.NewImage == nil {
		return fail(errors.New("no NEW_IMAGE: the analytics table's stream must be NEW_IMAGE or NEW_AND_OLD_IMAGES"))
	}
	e, err := analytics.EventFromItem(store.ItemFromStreamImage(rec.Dynamodb.NewImage))
	if err != nil {
		return fail(err)
	}
	msg, err := Message(e)
	if err != nil {
		return fail(err)
	}
	// Publish only what the consumers can read: an item the store would
	// never write (no session, no ULID, …) is poisoned here, once, rather
	// than in every consumer group.
	if _, err := Decode(msg.Payload); err != nil {
		return fail(err)
	}
	return relay.Outgoing{Topic: t.Topics.Analytics(e.SourceID), Message: msg}, true, nil
}

func stringAttr(img map[string]streamtypes.AttributeValue, name string) string {
	if v, ok := img[name].(*streamtypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}
