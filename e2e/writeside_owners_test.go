package e2e_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/httpapi/auth"
	"github.com/eventpipe/eventpipe/httpapi/auth/authtest"
	"github.com/eventpipe/eventpipe/operator"
)

const ownersIss, ownersAud = "https://idp.owners.test/", "eventpipe-owners"

// ownersService serves the write side's whole HTTP API (with the status
// page, as serve mounts it) under auth with policy, on a fresh events
// table, analytics table and migrated read-model schema. It returns the
// base URL, the mounted route patterns, a Postgres connection to the
// schema and a count of a table's items.
func ownersService(t *testing.T, idp *authtest.Provider, policy *auth.Policy) *ownersRig {
	t.Helper()
	r := newAnalyticsRig(t)
	e := readModelSchema(t, r.ep, true)
	svc, err := eventpipe.NewWriteSide(context.Background(), eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: e}, ConsumerGroup: testenv.UniqueName(t, "g"),
		Auth:           &auth.Config{JWKSURL: idp.Serve(t), HTTPClient: idp.HTTPClient(), Issuer: ownersIss, Audience: ownersAud, Policy: policy},
		OperatorRoutes: operator.MountRoutes}) // as serve mounts them
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	srv, err := svc.NewHTTP()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() { done <- srv.Run(ctx, ready) }()
	t.Cleanup(func() { cancel(); <-done })
	conn, err := pgx.Connect(context.Background(), e.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	ddb := testenv.DynamoDB(t)
	count := func(table string) int32 {
		out, err := ddb.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), Select: "COUNT", ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Count
	}
	return &ownersRig{base: "http://" + <-ready, patterns: srv.Mux.Patterns(), db: conn, count: count, store: svc.Store, ep: e}
}

type ownersRig struct {
	base     string
	patterns []string
	db       *pgx.Conn
	count    func(table string) int32
	store    eventstore.Store
	ep       endpoints.Endpoints
}

// TestOwnersAndSourceScopes runs the HTTP API under a policy that gives
// every subject only its own todos and its own analytics user, one
// service only its analytics source, and an admin everything. A todo
// records its creator as owner (in its events, its state and the read
// model); another subject cannot read, change or delete it (404, 403,
// 403, nothing stored) and its list holds only its own; the admin reads
// and changes any. The service ingests into its source (each event
// recording the service as actor) and is refused another source's reads
// and writes without a write; a subject reads its own user's sessions and
// not another's. A policy that names the analytics routes "sources" is
// refused at start.
func TestOwnersAndSourceScopes(t *testing.T) {
	idp := authtest.New(t, ownersIss, ownersAud)
	policy := &auth.Policy{Rules: []auth.Rule{
		{Subjects: []string{"*"}, On: auth.OnOwn, Commands: []string{todo.CreateTodo, todo.UpdateTodo, todo.DeleteTodo}, Read: []string{"todo", "analytics"}},
		{Scopes: []string{"shop-a:ingest"}, Sources: []string{"shop-a"}, Read: []string{"analytics"}, Write: []string{"analytics"}},
		{Subjects: []string{"root"}, Admin: true},
	}}
	rig := ownersService(t, idp, policy)
	base, db, count := rig.base, rig.db, rig.count
	tables := struct{ events, analytics string }{rig.ep.EventsTable, rig.ep.AnalyticsTable}
	tok := func(sub, scope string) string {
		return idp.Sign(t, authtest.EdDSA, authtest.Claims{Subject: sub, Scope: scope})
	}
	alice, bob, root, shop := tok("alice", ""), tok("bob", ""), tok("root", ""), tok("shop-a-importer", "shop-a:ingest")

	for _, c := range []struct{ token, body string }{{alice, `{"id":"a1","title":"alice's"}`}, {alice, `{"id":"a2","title":"alice's too"}`}, {bob, `{"id":"b1","title":"bob's"}`}} {
		if r := authCall(t, "POST", base+"/todo", c.token, "", c.body); r.status != 201 {
			t.Fatalf("create %s: %+v", c.body, r)
		}
	}
	if r := authCall(t, "GET", base+"/todo/a1", alice, "", ""); r.status != 200 || r.todo.Owner != "alice" {
		t.Fatalf("alice reads a1: %+v; want 200 owned by alice", r)
	}
	facet, err := todo.NewFacet(rig.store, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := facet.Get(context.Background(), "b1"); err != nil || st.Item.Owner != "bob" {
		t.Fatalf("b1's state: %+v, %v; want owner bob", st.Item, err)
	}

	before := count(tables.events)
	for _, c := range []struct {
		name, method, path, ifMatch, body string
		status                            int
	}{
		{"bob reads a1", "GET", "/todo/a1", "", "", 404},
		{"bob updates a1", "PUT", "/todo/a1", `"1"`, `{"title":"bob was here"}`, 403},
		{"bob deletes a1", "DELETE", "/todo/a1", `"1"`, "", 403},
		{"bob creates over a1", "POST", "/todo", "", `{"id":"a1","title":"mine now"}`, 409},
	} {
		if r := authCall(t, c.method, base+c.path, bob, c.ifMatch, c.body); r.status != c.status {
			t.Errorf("%s: %+v; want %d", c.name, r, c.status)
		}
		if n := count(tables.events); n != before {
			t.Fatalf("%s: the events table went from %d to %d items", c.name, before, n)
		}
	}
	if r := authCall(t, "PUT", base+"/todo/a1", alice, `"1"`, `{"title":"alice's, changed"}`); r.status != 200 {
		t.Fatalf("alice updates a1: %+v", r)
	}
	if r := authCall(t, "PUT", base+"/todo/b1", root, `"1"`, `{"title":"bob's, fixed by root"}`); r.status != 200 {
		t.Fatalf("the admin updates b1: %+v", r)
	}
	if r := authCall(t, "GET", base+"/todo/a1", root, "", ""); r.status != 200 || r.todo.Title != "alice's, changed" {
		t.Fatalf("the admin reads a1: %+v", r)
	}

	// The list is the read model's; its rows carry the owner as the
	// projection writes it (rows inserted here as it would).
	if _, err := db.Exec(context.Background(), `INSERT INTO todos (todo_id, title, owner, version, created_at, updated_at) VALUES
		('a1', 'alice''s', 'alice', 2, now(), now()), ('a2', 'alice''s too', 'alice', 1, now(), now()), ('b1', 'bob''s', 'bob', 2, now(), now()), ('c1', 'claimed', '', 1, now(), now())`); err != nil {
		t.Fatal(err)
	}
	list := func(token string) []string {
		code, body := getWithBearer(t, base+"/todo", token)
		if code != 200 {
			t.Fatalf("GET /todo: %d %s", code, body)
		}
		return regexp.MustCompile(`"id":"([^"]+)"`).FindAllString(body, -1)
	}
	if got := list(alice); !slices.Equal(got, []string{`"id":"a1"`, `"id":"a2"`}) {
		t.Errorf("alice's list: %v; want a1, a2", got)
	}
	if got := list(bob); !slices.Equal(got, []string{`"id":"b1"`}) {
		t.Errorf("bob's list: %v; want b1", got)
	}
	if got := list(root); len(got) != 4 {
		t.Errorf("the admin's list: %v; want all four", got)
	}

	// Analytics: the service's source only, each event recording it.
	if r := authCall(t, "POST", base+"/sources/shop-a/events", shop, "", `{"type":"page_view","sessionId":"s1","userId":"alice","url":"/"}`); r.status != 201 {
		t.Fatalf("the service ingests into shop-a: %+v", r)
	}
	code, body := getWithBearer(t, base+"/sources/shop-a/sessions/s1/events", shop)
	if code != 200 || !strings.Contains(body, `"actor":"shop-a-importer"`) {
		t.Fatalf("shop-a's session s1: %d %s; want its event with actor shop-a-importer", code, body)
	}
	analyticsBefore := count(tables.analytics)
	for _, c := range []struct{ name, method, path, token, body string }{
		{"the service ingests into shop-b", "POST", "/sources/shop-b/events", shop, `{"type":"page_view","sessionId":"s1"}`},
		{"the service reads shop-b", "GET", "/sources/shop-b/sessions", shop, ""},
		{"the service reads shop-b's hours", "GET", "/sources/shop-b/aggregations?period=hourly", shop, ""},
		{"alice ingests", "POST", "/sources/shop-a/events", alice, `{"type":"page_view","sessionId":"s2"}`},
		{"alice reads a source", "GET", "/sources/shop-a/sessions/s1", alice, ""},
		{"alice reads bob's sessions", "GET", "/users/bob/sessions", alice, ""},
	} {
		if r := authCall(t, c.method, base+c.path, c.token, "", c.body); r.status != 403 || r.err.Code != "insufficient_scope" {
			t.Errorf("%s: %+v; want 403 insufficient_scope", c.name, r)
		}
	}
	if n := count(tables.analytics); n != analyticsBefore {
		t.Fatalf("refused requests went from %d to %d analytics items", analyticsBefore, n)
	}
	for _, c := range []struct{ name, path, token string }{
		{"alice reads her own sessions", "/users/alice/sessions", alice},
		{"the service reads a user's sessions of its source", "/users/alice/sessions", shop},
		{"the admin reads bob's sessions", "/users/bob/sessions", root},
	} {
		if code, body := getWithBearer(t, base+c.path, c.token); code != 200 {
			t.Errorf("%s: %d %s; want 200", c.name, code, body)
		}
	}

	// The analytics routes are the resource "analytics": a policy with
	// their old path names is refused before anything starts.
	ep := testenv.Endpoints()
	_, err = eventpipe.NewWriteSide(context.Background(), eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: ep}, ConsumerGroup: "unused",
		Auth: &auth.Config{JWKSFile: "unused.json", Issuer: ownersIss, Audience: ownersAud,
			Policy: &auth.Policy{Rules: []auth.Rule{{Subjects: []string{"alice"}, Read: []string{"sources"}}}}}})
	var invalid *eventstore.ValidationError
	if !errors.As(err, &invalid) || !strings.Contains(err.Error(), `the resource "analytics"`) {
		t.Fatalf("a policy granting \"sources\": %v; want a ValidationError naming the analytics resource", err)
	}
}

// routeGrant is a row of docs/security.md's route table: a route and the
// grant it needs ("" for none).
type routeGrant struct{ pattern, kind, name string }

// documentedRoutes reads the table under "### Every route and its grant"
// in docs/security.md.
func documentedRoutes(t *testing.T) []routeGrant {
	t.Helper()
	b, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "### Every route and its grant")
	if !ok {
		t.Fatal(`docs/security.md has no "### Every route and its grant" section`)
	}
	row := regexp.MustCompile("(?m)^\\| `([A-Z]+ /[^`]*)` \\| (?:`(command|read|write) ([^`]+)`|none) \\|")
	var out []routeGrant
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		out = append(out, routeGrant{pattern: m[1], kind: m[2], name: m[3]})
	}
	return out
}

// TestEveryRouteIsDocumentedAndPolicedByItsName serves the whole HTTP API
// under auth and checks that docs/security.md's route table lists
// exactly the routes the server mounts, and that each is policed by the
// grant the table names: without a token 401 (but the open /healthz), a
// subject granted nothing 403, a subject granted another resource (or
// command) 403, and a subject granted just that name neither 401 nor 403.
func TestEveryRouteIsDocumentedAndPolicedByItsName(t *testing.T) {
	idp := authtest.New(t, ownersIss, ownersAud)
	resources := append(eventpipe.Builtin().HTTPResourceNames(), eventpipe.OperatorResources...)
	var rules []auth.Rule
	for _, r := range resources {
		rules = append(rules, auth.Rule{Subjects: []string{"read-" + r}, Read: []string{r}}, auth.Rule{Subjects: []string{"write-" + r}, Write: []string{r}})
	}
	for _, c := range eventpipe.Builtin().CommandTypes() {
		rules = append(rules, auth.Rule{Subjects: []string{"command-" + c}, Commands: []string{c}})
	}
	rules = append(rules, auth.Rule{Subjects: []string{"nobody"}, Read: []string{"metrics"}}) // applies, grants nothing the table's routes need but /metrics
	rig := ownersService(t, idp, &auth.Policy{Rules: rules})
	base, patterns := rig.base, rig.patterns

	docs := documentedRoutes(t)
	var documented []string
	for _, d := range docs {
		documented = append(documented, d.pattern)
	}
	slices.Sort(documented)
	slices.Sort(patterns)
	if !slices.Equal(documented, patterns) {
		t.Fatalf("docs/security.md's route table lists\n  %v\nthe server mounts\n  %v", documented, patterns)
	}
	path := strings.NewReplacer("{id}", "r1", "{sessionId}", "s1", "{userId}", "u1")
	send := func(d routeGrant, subject string) authReply {
		method, p, _ := strings.Cut(d.pattern, " ")
		token := ""
		if subject != "" {
			token = idp.Sign(t, authtest.EdDSA, authtest.Claims{Subject: subject})
		}
		body := ""
		switch {
		case strings.HasPrefix(p, "/todo"):
			body = `{"title":"x"}`
		case strings.HasPrefix(p, "/sources"):
			body = `{"type":"page_view","sessionId":"s1"}`
		}
		if method == http.MethodGet || method == http.MethodDelete {
			body = ""
		}
		return authCall(t, method, base+path.Replace(p), token, `"1"`, body)
	}
	other := func(d routeGrant) string {
		for _, r := range resources {
			if r != d.name {
				return "read-" + r
			}
		}
		return ""
	}
	for _, d := range docs {
		if d.kind == "" {
			// A probe answers 503 while the write side is not started
			// (this test does not Run it): an answer all the same.
			probe := d.pattern == "GET /readyz" || d.pattern == "GET /startupz"
			if r := send(d, ""); r.status != 200 && !(probe && r.status == 503) {
				t.Errorf("%s without a token: %+v; want 200 (documented as open)", d.pattern, r)
			}
			continue
		}
		if r := send(d, ""); r.status != 401 {
			t.Errorf("%s without a token: %+v; want 401", d.pattern, r)
		}
		for _, sub := range []string{"nobody", other(d)} {
			if d.pattern == "GET /metrics" && sub == "nobody" {
				continue
			}
			if r := send(d, sub); r.status != 403 {
				t.Errorf("%s as %s: %+v; want 403", d.pattern, sub, r)
			}
		}
		if r := send(d, d.kind+"-"+d.name); r.status == 401 || r.status == 403 {
			t.Errorf("%s as %s-%s (the documented grant): %+v; want neither 401 nor 403", d.pattern, d.kind, d.name, r)
		}
	}
	if len(docs) < 15 {
		t.Fatalf("the route table has %d rows; the API has more routes", len(docs))
	}
}
