package auth_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/httpapi/auth"
)

// TestPolicyGrantsOwnAnySourcesAndAdmin: what each rule grants is
// narrowed by "on": "own" and sources and widened by admin; the grants of
// every rule that applies add up, and an "own" grant covers only the
// subject's own (never an aggregate without an owner).
func TestPolicyGrantsOwnAnySourcesAndAdmin(t *testing.T) {
	p := &auth.Policy{Rules: []auth.Rule{
		{Subjects: []string{"*"}, On: auth.OnOwn, Commands: []string{"UpdateTodo"}, Read: []string{"todo", "analytics"}},
		{Scopes: []string{"shop-a"}, Sources: []string{"shop-a"}, Read: []string{"analytics"}},
		{Scopes: []string{"shop-b"}, Sources: []string{"shop-b", "shop-c"}, Read: []string{"analytics"}, Write: []string{"analytics"}},
		{Subjects: []string{"ops"}, On: auth.OnAny, Read: []string{"todo"}},
		{Subjects: []string{"root"}, Admin: true},
	}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	alice, ops, root := auth.Identity{Subject: "alice"}, auth.Identity{Subject: "ops"}, auth.Identity{Subject: "root"}
	shops := auth.Identity{Subject: "importer", Scopes: []string{"shop-a", "shop-b"}}

	g := p.Command(alice, "UpdateTodo")
	if !g.Allowed() || g.Any || !g.OwnedBy("alice") || g.OwnedBy("bob") || g.OwnedBy("") {
		t.Errorf("alice's UpdateTodo grant %+v: want only her own todos", g)
	}
	if g := p.Command(alice, "DeleteTodo"); g.Allowed() {
		t.Errorf("alice's DeleteTodo grant %+v: want none", g)
	}
	if g := p.Read(ops, "todo"); !g.Any || !g.OwnedBy("bob") || !g.OwnedBy("") {
		t.Errorf("ops' todo read %+v: want every todo (its own rule and the \"own\" rule add up)", g)
	}
	if p.AllowsRead(alice, "todo") || !p.AllowsRead(ops, "todo") {
		t.Error("AllowsRead is a grant of everything: ops has it, alice does not")
	}
	g = p.Read(shops, "analytics")
	if g.Any || !g.Source("shop-a") || !g.Source("shop-c") || g.Source("shop-d") || !g.OwnedBy("importer") {
		t.Errorf("the importer's analytics read %+v: want shop-a, b, c and its own user", g)
	}
	if g := p.Write(shops, "analytics"); g.Source("shop-a") || !g.Source("shop-b") {
		t.Errorf("the importer's analytics write %+v: want shop-b and shop-c only", g)
	}
	for _, g := range []auth.Grant{p.Command(root, "DeleteTodo"), p.Read(root, "metrics"), p.Write(root, "analytics")} {
		if !g.Any || !g.Source("any") || !g.OwnedBy("bob") {
			t.Errorf("root's grant %+v: want everything", g)
		}
	}
	var nilPolicy *auth.Policy
	if g := nilPolicy.Read(root, "todo"); g.Allowed() {
		t.Errorf("a nil policy grants %+v", g)
	}
}

// TestPolicyRefusesAmbiguousRulesAndUnknownNames: a rule whose meaning
// is unclear, and a name the deployment does not have, are refused with a
// ValidationError naming the rule.
func TestPolicyRefusesAmbiguousRulesAndUnknownNames(t *testing.T) {
	for name, c := range map[string]struct {
		rule auth.Rule
		want string
	}{
		"bad on":            {auth.Rule{Subjects: []string{"a"}, On: "mine", Read: []string{"todo"}}, `on "mine"`},
		"admin and own":     {auth.Rule{Subjects: []string{"a"}, Admin: true, On: auth.OnOwn}, "admin"},
		"admin and sources": {auth.Rule{Subjects: []string{"a"}, Admin: true, Sources: []string{"s"}}, "admin"},
		"sources and own":   {auth.Rule{Subjects: []string{"a"}, On: auth.OnOwn, Sources: []string{"s"}, Read: []string{"analytics"}}, "do not combine"},
		"sources and todo":  {auth.Rule{Subjects: []string{"a"}, Sources: []string{"s"}, Read: []string{"analytics", "todo"}}, "only the analytics resource"},
		"sources and cmd":   {auth.Rule{Subjects: []string{"a"}, Sources: []string{"s"}, Commands: []string{"CreateTodo"}}, "only the analytics resource"},
		"empty source":      {auth.Rule{Subjects: []string{"a"}, Sources: []string{""}, Read: []string{"analytics"}}, "empty source"},
		"grants nothing":    {auth.Rule{Subjects: []string{"a"}, On: auth.OnOwn}, "grants no"},
		"applies to nobody": {auth.Rule{Admin: true}, "applies to nobody"},
	} {
		err := auth.Policy{Rules: []auth.Rule{{Subjects: []string{"x"}, Read: []string{"todo"}}, c.rule}}.Validate()
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != "rules[1]" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want a ValidationError on rules[1] saying %q", name, err, c.want)
		}
	}
	cmds, res := []string{"CreateTodo", "UpdateTodo"}, []string{"analytics", "status", "todo"}
	for name, c := range map[string]struct {
		rule auth.Rule
		want string
	}{
		"misspelt command": {auth.Rule{Subjects: []string{"a"}, Commands: []string{"UpdateTodos"}}, `"UpdateTodos" is not a command type`},
		"old path name":    {auth.Rule{Subjects: []string{"a"}, Read: []string{"sources"}}, `the resource "analytics"`},
		"unknown write":    {auth.Rule{Subjects: []string{"a"}, Write: []string{"orders"}}, `"orders" is not a resource`},
	} {
		err := auth.Policy{Rules: []auth.Rule{c.rule}}.CheckNames(cmds, res)
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want a ValidationError saying %q", name, err, c.want)
		}
	}
	ok := auth.Policy{Rules: []auth.Rule{{Subjects: []string{"a"}, Commands: []string{"*", "CreateTodo"}, Read: []string{"*", "todo"}, Write: []string{"analytics"}}, {Subjects: []string{"b"}, Admin: true}}}
	if err := ok.CheckNames(cmds, res); err != nil {
		t.Errorf("known names and *: %v", err)
	}
	if !slices.Contains(res, auth.AnalyticsResource) {
		t.Fatal("the analytics resource's name changed")
	}
}
