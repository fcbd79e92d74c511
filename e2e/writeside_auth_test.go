package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/dev/rigs"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/httpapi/auth"
	"github.com/eventpipe/eventpipe/httpapi/auth/authtest"
	"github.com/eventpipe/eventpipe/operator"
)

// TestHTTPAuth runs the write side's HTTP API with JWT auth on, keys from
// a JWKS URL: tokens signed with RS256, ES256 and EdDSA by the JWKS's
// keys are accepted and their subject is the stored events' actor; every
// refused token (expired, wrong issuer or audience, bad signature, "alg":
// "none", HS256 keyed with the public key, none at all) gets 401 with an
// invalid_token challenge, a command the policy does not grant gets 403
// insufficient_scope, and none of them adds an item to the events table;
// a key rotation at the identity provider is picked up without restart.
func TestHTTPAuth(t *testing.T) {
	const iss, aud = "https://idp.eventpipe.test/", "eventpipe-write"
	idp := authtest.New(t, iss, aud)
	ep := rigs.Endpoints(t)
	ep.HTTPAddr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	svc, err := eventpipe.NewWriteSide(context.Background(), eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: ep}, ConsumerGroup: testenv.UniqueName(t, "g"),
		Auth: &auth.Config{JWKSURL: idp.Serve(t), HTTPClient: idp.HTTPClient(), Issuer: iss, Audience: aud, MinRefreshInterval: 100 * time.Millisecond,
			Policy: &auth.Policy{Rules: []auth.Rule{
				{Subjects: []string{"alice"}, Commands: []string{todo.CreateTodo, todo.UpdateTodo}, Read: []string{"todo"}},
				{Scopes: []string{"todo:write"}, Commands: []string{todo.CreateTodo}},
				{Subjects: []string{"ops"}, Read: []string{"status"}},
			}}},
		OperatorRoutes: operator.MountRoutes}) // the operator routes, as serve mounts them
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	base := rigs.ServeHTTP(t, svc)

	db := testenv.DynamoDB(t)
	count := func() int32 {
		out, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(ep.EventsTable), Select: "COUNT", ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Count
	}
	actors := func(id string) []string {
		evs, err := svc.Store.Load(context.Background(), eventstore.Ref{Type: todo.AggregateType, ID: id}, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range evs {
			out = append(out, e.Metadata.Actor)
			if e.Metadata.ActorSource != eventstore.ActorHTTP {
				t.Errorf("event %s of %s: actor source %q, want %q (the verified token's subject)", e.EventID, id, e.Metadata.ActorSource, eventstore.ActorHTTP)
			}
		}
		return out
	}
	alice := func(alg string) string { return idp.Sign(t, alg, authtest.Claims{Subject: "alice"}) }

	// Accepted: each algorithm, the subject recorded as the actor.
	if r := authCall(t, "POST", base+"/todo", alice(authtest.RS256), "", `{"id":"a1","title":"buy milk"}`); r.status != 201 {
		t.Fatalf("create with RS256: %+v", r)
	}
	if r := authCall(t, "PUT", base+"/todo/a1", alice(authtest.ES256), `"1"`, `{"title":"buy oat milk"}`); r.status != 200 {
		t.Fatalf("update with ES256: %+v", r)
	}
	if r := authCall(t, "GET", base+"/todo/a1", alice(authtest.EdDSA), "", ""); r.status != 200 || r.todo.Title != "buy oat milk" {
		t.Fatalf("read with EdDSA: %+v", r)
	}
	svcTok := idp.Sign(t, authtest.EdDSA, authtest.Claims{Subject: "svc-importer", Scope: "openid todo:write"})
	if r := authCall(t, "POST", base+"/todo", svcTok, "", `{"id":"s1","title":"imported"}`); r.status != 201 {
		t.Fatalf("create granted by scope: %+v", r)
	}
	if got := strings.Join(actors("a1"), ","); got != "alice,alice" {
		t.Fatalf("the events of a1 carry actors %q, want alice,alice", got)
	}
	if got := strings.Join(actors("s1"), ","); got != "svc-importer" {
		t.Fatalf("the events of s1 carry actors %q, want svc-importer", got)
	}
	if r := authCall(t, "GET", base+"/healthz", "", "", ""); r.status != 200 {
		t.Fatalf("/healthz without a token: %+v", r)
	}

	before := count()
	now := time.Now()
	good := alice(authtest.ES256)
	sig := good[strings.LastIndexByte(good, '.')+1:]
	flipped := "A"
	if sig[0] == 'A' {
		flipped = "B"
	}
	badSig := good[:len(good)-len(sig)] + flipped + sig[1:]
	for _, c := range []struct{ name, token, challenge string }{
		{"missing", "", `Bearer realm="eventpipe"`},
		{"expired", idp.Sign(t, authtest.RS256, authtest.Claims{Subject: "alice", IssuedAt: now.Add(-time.Hour), Expires: now.Add(-5 * time.Minute)}), `error="invalid_token", error_description="the token has expired"`},
		{"wrong issuer", idp.Sign(t, authtest.RS256, authtest.Claims{Subject: "alice", Issuer: "https://evil.test/"}), `error="invalid_token", error_description="wrong issuer"`},
		{"wrong audience", idp.Sign(t, authtest.ES256, authtest.Claims{Subject: "alice", Audience: "other"}), `error="invalid_token", error_description="wrong audience"`},
		{"bad signature", badSig, `error="invalid_token"`},
		{"alg none", idp.ForgeNone(t, authtest.RS256, authtest.Claims{Subject: "alice"}), `error="invalid_token"`},
		{"HS256 with the public key", idp.ForgeHS256(t, authtest.Claims{Subject: "alice"}), `error="invalid_token"`},
	} {
		for _, req := range [][3]string{{"POST", "/todo", `{"id":"x-` + strconv.Itoa(len(c.name)) + `","title":"x"}`}, {"PUT", "/todo/a1", `{"title":"x"}`}, {"GET", "/todo/a1", ""}} {
			r := authCall(t, req[0], base+req[1], c.token, `"2"`, req[2])
			if r.status != 401 || !strings.Contains(r.challenge, c.challenge) || r.err.Code == "" {
				t.Errorf("%s: %s %s → %d %q %+v; want 401 with %s", c.name, req[0], req[1], r.status, r.challenge, r.err, c.challenge)
			}
		}
		if n := count(); n != before {
			t.Fatalf("%s: the events table went from %d to %d items", c.name, before, n)
		}
	}

	// Authenticated but not granted: 403, nothing stored.
	bob := idp.Sign(t, authtest.RS256, authtest.Claims{Subject: "bob"})
	for _, c := range []struct{ name, method, path, token, ifMatch, body string }{
		{"alice deletes", "DELETE", "/todo/a1", alice(authtest.RS256), `"2"`, ""},
		{"bob creates", "POST", "/todo", bob, "", `{"id":"b1","title":"x"}`},
		{"bob reads", "GET", "/todo/a1", bob, "", ""},
		{"scope does not grant update", "PUT", "/todo/s1", svcTok, `"1"`, `{"title":"x"}`},
		{"alice reads the orders", "GET", "/orders/search?q=x", alice(authtest.EdDSA), "", ""},
	} {
		r := authCall(t, c.method, base+c.path, c.token, c.ifMatch, c.body)
		if r.status != 403 || !strings.Contains(r.challenge, `error="insufficient_scope"`) || r.err.Code != "insufficient_scope" {
			t.Errorf("%s: %d %q %+v; want 403 insufficient_scope", c.name, r.status, r.challenge, r.err)
		}
		if n := count(); n != before {
			t.Fatalf("%s: the events table went from %d to %d items", c.name, before, n)
		}
	}

	// The status page, on the API's listener, is behind the same auth and
	// shows who is allowed.
	if r := authCall(t, "GET", base+"/status.json", alice(authtest.RS256), "", ""); r.status != 403 {
		t.Errorf("alice reads the status page: %+v; want 403", r)
	}
	ops := idp.Sign(t, authtest.ES256, authtest.Claims{Subject: "ops"})
	var page struct {
		Access struct {
			Mode, Issuer, Audience, Operator string
			Rules                            []struct{ Subjects, Scopes, Commands, Read []string }
		}
	}
	rigs.WaitUntil(t, "ops reads /status.json", func() (bool, string) {
		code, body := getWithBearer(t, base+"/status.json", ops)
		if code != 200 { // 503 until the first sample
			return false, fmt.Sprintf("%d %s", code, body)
		}
		return json.Unmarshal([]byte(body), &page) == nil, body
	})
	if page.Access.Mode != "jwt" || page.Access.Issuer != iss || page.Access.Audience != aud || len(page.Access.Rules) != 3 ||
		!slices.Equal(page.Access.Rules[0].Subjects, []string{"alice"}) || !slices.Equal(page.Access.Rules[1].Scopes, []string{"todo:write"}) ||
		!strings.Contains(page.Access.Operator, "behind its authentication") {
		t.Errorf("status page access %+v; want jwt, the issuer, audience and the policy's three rules", page.Access)
	}

	// Rotation: the new kid is fetched on first sight, the old one is gone.
	oldTok := alice(authtest.RS256)
	time.Sleep(150 * time.Millisecond) // past MinRefreshInterval since the last fetch
	oldKid, newKid := idp.Rotate(t, authtest.RS256)
	if r := authCall(t, "POST", base+"/todo", alice(authtest.RS256), "", `{"id":"a2","title":"after rotation"}`); r.status != 201 {
		t.Fatalf("create under the new kid %s: %+v", newKid, r)
	}
	if got := strings.Join(actors("a2"), ","); got != "alice" {
		t.Fatalf("the events of a2 carry actors %q", got)
	}
	time.Sleep(150 * time.Millisecond)
	after := count()
	if r := authCall(t, "POST", base+"/todo", oldTok, "", `{"id":"a3","title":"old key"}`); r.status != 401 {
		t.Fatalf("create under the removed kid %s: %+v", oldKid, r)
	}
	if n := count(); n != after {
		t.Fatalf("the removed kid's request went from %d to %d items", after, n)
	}
}

type authReply struct {
	reply
	challenge string
}

// authCall is call with a bearer token when token is set.
func authCall(t *testing.T, method, url, token, ifMatch, body string) authReply {
	t.Helper()
	bearer := ""
	if token != "" {
		bearer = "Bearer " + token
	}
	r, h := callHeaders(t, method, url, body, map[string]string{"Authorization": bearer, "If-Match": ifMatch})
	return authReply{reply: r, challenge: h.Get("WWW-Authenticate")}
}

// getWithBearer GETs url with a bearer token and returns the status and
// body.
func getWithBearer(t *testing.T, url, token string) (int, string) {
	t.Helper()
	return doWithBearer(t, http.MethodGet, url, token, "")
}

// TestHTTPAPIIsNotServedOpenByAccident builds a write side with neither
// Auth nor NoAuth: NewHTTP refuses with ErrNoAuth, so a program that
// forgets to configure authentication does not serve an open API.
func TestHTTPAPIIsNotServedOpenByAccident(t *testing.T) {
	ep := rigs.Endpoints(t)
	ep.HTTPAddr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	svc, err := eventpipe.NewWriteSide(context.Background(), eventpipe.WriteSideConfig{Process: eventpipe.Process{Endpoints: ep}, ConsumerGroup: testenv.UniqueName(t, "g")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	if _, err := svc.NewHTTP(); !errors.Is(err, eventpipe.ErrNoAuth) {
		t.Fatalf("NewHTTP without Auth or NoAuth: %v; want ErrNoAuth", err)
	}
	if err := svc.Run(context.Background()); !errors.Is(err, eventpipe.ErrNoAuth) {
		t.Fatalf("Run without Auth or NoAuth: %v; want ErrNoAuth", err)
	}
}
