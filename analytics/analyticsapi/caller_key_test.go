package analyticsapi_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
)

// TestIdempotencyKeyIsTheCallers posts one batch under one key as alice
// and as bob on one source: bob's post is not deduplicated against
// alice's (his events are stored with ids of their own) and neither
// replays the other's answer, while each caller's retry is answered from
// its own first post and another body under its own key is 422.
func TestIdempotencyKeyIsTheCallers(t *testing.T) {
	a := newAPI(t, "")
	body := `{"events":[{"type":"page_view","sessionId":"s1","url":"/"},{"type":"click","sessionId":"s1"}]}`
	post := func(subject, body string) (int, string, []string) {
		t.Helper()
		status, _, out := a.post("/sources/site/events", body, map[string]string{"Idempotency-Key": "k-1", "X-Subject": subject})
		b, _ := json.Marshal(out)
		var ids []string
		for _, e := range out.Events {
			ids = append(ids, e.EventID)
		}
		return status, string(b), ids
	}
	status, alice, aliceIDs := post("alice", body)
	if status != http.StatusCreated || len(aliceIDs) != 2 {
		t.Fatalf("alice's post: %d %s", status, alice)
	}
	afterAlice := a.count()
	status, bob, bobIDs := post("bob", body)
	if status != http.StatusCreated || len(bobIDs) != 2 {
		t.Fatalf("bob's post: %d %s", status, bob)
	}
	for _, id := range bobIDs {
		if slices.Contains(aliceIDs, id) {
			t.Errorf("bob's post under alice's key got alice's event %s: deduplicated across callers", id)
		}
	}
	if got := a.count(); got != afterAlice+3 { // bob's two events and his key
		t.Errorf("bob's post took the table from %d to %d items, want %d", afterAlice, got, afterAlice+3)
	}
	n := a.count()
	for _, c := range []struct{ subject, first string }{{"alice", alice}, {"bob", bob}} {
		if status, again, _ := post(c.subject, body); status != http.StatusCreated || again != c.first {
			t.Errorf("%s's retry: %d\n%s\nwant their first answer\n%s", c.subject, status, again, c.first)
		}
		if status, reused, _ := post(c.subject, `{"events":[{"type":"page_view","sessionId":"s2"}]}`); status != http.StatusUnprocessableEntity {
			t.Errorf("%s's other body under their key: %d %s, want 422", c.subject, status, reused)
		}
	}
	if got := a.count(); got != n {
		t.Errorf("the retries and refused posts changed the table from %d to %d items", n, got)
	}
}
