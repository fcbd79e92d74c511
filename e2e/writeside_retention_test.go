package e2e_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/todo"
)

// TestTodoAPIBadRequestWithAnIdempotencyKeyWritesNothing sends requests
// the todo commands refuse as invalid, each with a fresh Idempotency-Key:
// 400, and the events table holds exactly what it held (no claim of the
// key either).
func TestTodoAPIBadRequestWithAnIdempotencyKeyWritesNothing(t *testing.T) {
	base, ep := startHTTPOn(t)
	first := mustSend(t, "POST", base+"/todo", "k-good", "", `{"id":"a1","title":"buy milk"}`)
	if first.status != 201 {
		t.Fatalf("create: %+v", first)
	}
	before := len(tableItems(t, ep))
	for i, c := range []struct{ name, method, path, ifMatch, body string }{
		{"empty title", "POST", "/todo", "", `{"title":""}`},
		{"blank title", "POST", "/todo", "", `{"id":"b1","title":"   "}`},
		{"title too long", "POST", "/todo", "", `{"title":"` + strings.Repeat("x", todo.MaxTitleLength+1) + `"}`},
		{"message too long", "POST", "/todo", "", `{"title":"x","message":"` + strings.Repeat("m", todo.MaxMessageLength+1) + `"}`},
		{"reserved id", "POST", "/todo", "", `{"id":"a#b","title":"x"}`},
		{"update empty title", "PUT", "/todo/a1", `"1"`, `{"title":""}`},
		{"update reserved id", "PUT", "/todo/a%23b", `"1"`, `{"title":"x"}`},
	} {
		a := mustSend(t, c.method, base+c.path, "k-bad-"+strconv.Itoa(i), c.ifMatch, c.body)
		if a.status != 400 || a.code() != "invalid" {
			t.Errorf("%s: %+v, want 400 invalid", c.name, a)
		}
		if n := len(tableItems(t, ep)); n != before {
			t.Fatalf("%s: the events table went from %d to %d items", c.name, before, n)
		}
	}
	if a := mustSend(t, "POST", base+"/todo", "k-good", "", `{"id":"a1","title":"buy milk"}`); a != first {
		t.Fatalf("the good request retried: %+v, first %+v", a, first)
	}
}

// TestCommandRecordsAndClaimsExpireAfterTheRetention creates a todo with
// an Idempotency-Key on a write side with the default retention and on
// one with WriteSideConfig.CommandRetention set: the command record and
// the key's claim carry a ttl that far from now, so DynamoDB's TTL
// deletes them.
func TestCommandRecordsAndClaimsExpireAfterTheRetention(t *testing.T) {
	custom := 2 * time.Hour
	for _, c := range []struct {
		name      string
		retention time.Duration
		want      time.Duration
	}{
		{"default", 0, eventpipe.DefaultCommandRetention},
		{"configured", custom, custom},
	} {
		t.Run(c.name, func(t *testing.T) {
			ep := rigs.Endpoints(t)
			ep.HTTPAddr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
			svc, err := eventpipe.NewWriteSide(context.Background(), eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: ep},
				ConsumerGroup: testenv.UniqueName(t, "g"), NoAuth: true, CommandRetention: c.retention})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = svc.Close() })
			base := rigs.ServeHTTP(t, svc)
			start := time.Now()
			if a := mustSend(t, "POST", base+"/todo", "k1", "", `{"title":"buy milk"}`); a.status != 201 {
				t.Fatalf("create: %+v", a)
			}
			end := time.Now()
			records := 0
			for _, it := range tableItems(t, ep) {
				if !strings.HasPrefix(attrS(it, "sk"), "COMMAND#") {
					continue
				}
				records++
				n, ok := it["ttl"].(*ddbtypes.AttributeValueMemberN)
				if !ok {
					t.Errorf("%s/%s has no ttl", attrS(it, "pk"), attrS(it, "sk"))
					continue
				}
				ttl, _ := strconv.ParseInt(n.Value, 10, 64)
				if lo, hi := start.Add(c.want).Unix()-1, end.Add(c.want).Unix()+1; ttl < lo || ttl > hi {
					t.Errorf("%s/%s: ttl %s, want %v after the request", attrS(it, "pk"), attrS(it, "sk"), time.Unix(ttl, 0).UTC(), c.want)
				}
			}
			if records != 2 {
				t.Errorf("%d command records, want 2 (the key's claim and the create's record)", records)
			}
		})
	}
}
