package analytics_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/privacy"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// personalInput is an event of user (anonymous when empty) whose every
// personal field holds a value naming tag.
func personalInput(session, user, tag string) analytics.EventInput {
	return analytics.EventInput{Type: "page_view", SessionID: session, UserID: user,
		URL: "https://shop.example/" + tag + "/basket", Referrer: "https://mail.example/" + tag,
		UserAgent: "agent-" + tag, Properties: map[string]any{"email": tag + "@example.com"}}
}

func personalValues(tag string) []string {
	return []string{"/" + tag + "/basket", "mail.example/" + tag, "agent-" + tag, tag + "@example.com"}
}

// TestSealingAnalyticsStoreKeepsUsersFieldsSealedAndForgets, on
// DynamoDB Local and the local KMS: a signed-in user's url, referrer,
// user agent and properties are sealed in the table and read clear;
// an anonymous visitor's are stored as they are; after the user is
// forgotten they read as forgotten, the other user's stay readable,
// and the forgotten user's new events are refused with nothing written.
func TestSealingAnalyticsStoreKeepsUsersFieldsSealedAndForgets(t *testing.T) {
	ctx := context.Background()
	keys := integration.KeyStore(t)
	st, db, table := newStore(t, func(c *analytics.Config) { c.Keys = keys })
	ingested, err := st.Ingest(ctx, "shop", []analytics.EventInput{
		personalInput("s-ann", "ann", "annval"),
		personalInput("s-bob", "bob", "bobval"),
		personalInput("s-anon", "", "anonval"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if ingested[0].URL != "https://shop.example/annval/basket" {
		t.Fatalf("the ingested event is answered as %q, want the clear url", ingested[0].URL)
	}
	stored := testenv.TableDump(t, db, table)
	for _, tag := range []string{"annval", "bobval"} {
		for _, v := range personalValues(tag) {
			if strings.Contains(stored, v) {
				t.Errorf("the table holds %q in clear", v)
			}
		}
	}
	for _, v := range personalValues("anonval") {
		if !strings.Contains(stored, v) {
			t.Errorf("the anonymous event's %q is not stored as it was", v)
		}
	}

	// A session as the aggregation consumer writes it: the entry url is
	// the event's sealed url, copied.
	raw, err := db.GetItem(ctx, &ddb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: analytics.EventKey("shop", ingested[0].Shard, ingested[0].EventID).Attributes()})
	if err != nil {
		t.Fatal(err)
	}
	sealedURL := raw.Item[analytics.AttrURL]
	sk := analytics.SessionKey("shop", "s-ann")
	put(t, db, table, map[string]types.AttributeValue{
		analytics.AttrPK: s(sk.PK), analytics.AttrSK: s(sk.SK), analytics.AttrUserID: s("ann"),
		analytics.AttrEventCount: n(1), analytics.AttrEntryURL: sealedURL, analytics.AttrExitURL: sealedURL,
		analytics.AttrEntryEventID: s(ingested[0].EventID), analytics.AttrExitEventID: s(ingested[0].EventID),
		analytics.AttrFirstSeenAt: s(ingested[0].CreatedAt.Format("2006-01-02T15:04:05Z07:00")),
		analytics.AttrLastSeenAt:  s(ingested[0].CreatedAt.Format("2006-01-02T15:04:05Z07:00")),
		analytics.AttrDuration:    n(0),
	})

	read := func(session string) analytics.Event {
		t.Helper()
		evs, err := st.SessionEvents(ctx, "shop", session)
		if err != nil || len(evs) != 1 {
			t.Fatalf("events of %s: %v, %v", session, evs, err)
		}
		return evs[0]
	}
	ann := read("s-ann")
	if ann.URL != ingested[0].URL || ann.Referrer != ingested[0].Referrer || ann.UserAgent != ingested[0].UserAgent ||
		fmt.Sprint(ann.Properties) != "map[email:annval@example.com]" || ann.SealedProperties != "" {
		t.Fatalf("ann's event reads %+v, want it clear", ann)
	}
	sess, ok, err := st.Session(ctx, "shop", "s-ann")
	if err != nil || !ok || sess.EntryURL != ingested[0].URL || sess.ExitURL != ingested[0].URL {
		t.Fatalf("ann's session reads %+v (%v, %v), want its entry url clear", sess, ok, err)
	}

	// A sealed url moved to another event does not open.
	bobRaw, _ := db.GetItem(ctx, &ddb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: analytics.EventKey("shop", ingested[1].Shard, ingested[1].EventID).Attributes()})
	moved := bobRaw.Item
	moved[analytics.AttrReferrer] = moved[analytics.AttrURL]
	put(t, db, table, moved)
	var de *eventstore.DecodeError
	if _, err := st.SessionEvents(ctx, "shop", "s-bob"); !errors.As(err, &de) {
		t.Fatalf("a url moved to the referrer read with %v, want a *eventstore.DecodeError", err)
	}
	delete(moved, analytics.AttrReferrer)
	put(t, db, table, moved)

	// A store without keys does not pass sealed values off as data.
	clear, err := analytics.New(analytics.Config{Client: db, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clear.SessionEvents(ctx, "shop", "s-ann"); err == nil || !strings.Contains(err.Error(), "no keys") {
		t.Fatalf("a store without keys read sealed fields with %v, want a refusal", err)
	}

	if _, err := keys.Forget(ctx, "ann"); err != nil {
		t.Fatal(err)
	}
	ann = read("s-ann")
	if ann.URL != privacy.ForgottenText || ann.Referrer != privacy.ForgottenText || ann.UserAgent != privacy.ForgottenText ||
		fmt.Sprint(ann.Properties) != "map[forgotten:true]" {
		t.Fatalf("ann's event reads %+v after the forget, want every personal field forgotten", ann)
	}
	if sess, _, err := st.Session(ctx, "shop", "s-ann"); err != nil || sess.EntryURL != privacy.ForgottenText {
		t.Fatalf("ann's session reads %+v (%v) after the forget", sess, err)
	}
	if bob := read("s-bob"); bob.URL != ingested[1].URL || fmt.Sprint(bob.Properties) != "map[email:bobval@example.com]" {
		t.Fatalf("bob's event reads %+v after ann was forgotten", bob)
	}

	before := countItems(t, db, table)
	_, err = st.Ingest(ctx, "shop", []analytics.EventInput{personalInput("s-bob2", "bob", "bob2"), personalInput("s-ann2", "ann", "ann2")})
	var fe *privacy.ForgottenError
	var ee *analytics.EventError
	if !errors.As(err, &fe) || !errors.As(err, &ee) || ee.Index != 1 {
		t.Fatalf("ingesting for a forgotten user: %v, want a *privacy.ForgottenError of event 1", err)
	}
	if after := countItems(t, db, table); after != before {
		t.Fatalf("the refused batch wrote %d items", after-before)
	}
}
