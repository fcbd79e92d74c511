package e2e_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestTodoAPIFollowsTheReferenceWalkThroughAsWritten sends the reference
// design's todo requests with their bodies verbatim (POST /todo with a
// client-chosen id, title and message; an update by POST with If-Match;
// a DELETE with If-Match) and checks the answers it describes: 201 with
// the sequence as ETag, a GET with the same ETag, 200 and the next
// sequence for an update with the current ETag, 409 for the same update
// with the now stale one, 409 for a taken id, 404 for an unknown id, and
// 204 for the delete, after which the todo is gone (404). The reference
// numbers the creating event 0; eventpipe numbers it 1, so its first
// ETag is "1" (docs/domains.md).
func TestTodoAPIFollowsTheReferenceWalkThroughAsWritten(t *testing.T) {
	base := startHTTP(t)
	const id = "D8E8B51E-0337-4300-B414-0CC65918AAF8"
	const create = `{"id": "D8E8B51E-0337-4300-B414-0CC65918AAF8", "title": "TODO", "message": "Make coffee"}`
	const update = `{"title": "TODO", "message": "Make 2 coffees"}`

	created := seedCall(t, "POST", base+"/todo", "", create)
	if created.status != http.StatusCreated || created.etag != `"1"` || created.todo.ID != id || created.todo.Message != "Make coffee" {
		t.Fatalf("create: %d ETag %s %+v %+v", created.status, created.etag, created.todo, created.err)
	}
	if again := seedCall(t, "POST", base+"/todo", "", create); again.status != http.StatusConflict {
		t.Fatalf("create with a taken id: %d, want 409", again.status)
	}
	got := seedCall(t, "GET", base+"/todo/"+id, "", "")
	if got.status != http.StatusOK || got.etag != created.etag || got.todo.Title != "TODO" || got.todo.Message != "Make coffee" {
		t.Fatalf("get: %d ETag %s %+v", got.status, got.etag, got.todo)
	}
	updated := seedCall(t, "POST", base+"/todo/"+id, got.etag, update)
	if updated.status != http.StatusOK || updated.etag != `"2"` || updated.todo.Message != "Make 2 coffees" {
		t.Fatalf("update with If-Match %s: %d ETag %s %+v %+v", got.etag, updated.status, updated.etag, updated.todo, updated.err)
	}
	if stale := seedCall(t, "POST", base+"/todo/"+id, got.etag, update); stale.status != http.StatusConflict {
		t.Fatalf("update with the stale If-Match %s: %d, want 409", got.etag, stale.status)
	}
	if unknown := seedCall(t, "POST", base+"/todo/"+strings.Replace(id, "D8", "00", 1), `"1"`, update); unknown.status != http.StatusNotFound {
		t.Fatalf("update of an unknown id: %d, want 404", unknown.status)
	}
	if after := seedCall(t, "GET", base+"/todo/"+id, "", ""); after.etag != `"2"` || after.todo.Message != "Make 2 coffees" {
		t.Fatalf("get after the update: ETag %s %+v", after.etag, after.todo)
	}
	if stale := seedCall(t, "DELETE", base+"/todo/"+id, `"1"`, ""); stale.status != http.StatusConflict {
		t.Fatalf("delete with a stale If-Match: %d, want 409", stale.status)
	}
	if deleted := seedCall(t, "DELETE", base+"/todo/"+id, updated.etag, ""); deleted.status != http.StatusNoContent {
		t.Fatalf("delete with If-Match %s: %d %+v", updated.etag, deleted.status, deleted.err)
	}
	if gone := seedCall(t, "GET", base+"/todo/"+id, "", ""); gone.status != http.StatusNotFound {
		t.Fatalf("get after the delete: %d, want 404", gone.status)
	}
}

// seedCall is call with the reference's Content-Type header.
func seedCall(t *testing.T, method, url, ifMatch, body string) reply {
	t.Helper()
	return callWith(t, method, url, ifMatch, body, "application/json")
}
