package auth

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Policy says which identities may send which command types and read or
// write which resources, and on what: everything, only what the identity
// owns, or only some analytics sources. It denies by default: a request
// is allowed only when at least one rule applies to the identity and
// grants what the request does on what it does it to.
//
// Its JSON form, as a policy file holds it:
//
//	{"rules": [
//	  {"subjects": ["*"], "on": "own", "commands": ["CreateTodo", "UpdateTodo", "DeleteTodo"], "read": ["todo"]},
//	  {"scopes": ["shop-a:analytics"], "sources": ["shop-a"], "read": ["analytics"], "write": ["analytics"]},
//	  {"scopes": ["todo:admin"], "admin": true}
//	]}
type Policy struct {
	Rules []Rule `json:"rules"`
}

// Rule grants its commands, reads and writes to the identities it applies
// to: those whose subject is in Subjects, and those that hold at least
// one of Scopes. "*" in Subjects applies the rule to every authenticated
// identity; "*" in Commands, Read or Write grants every command type or
// resource.
type Rule struct {
	// Subjects are token subjects (the "sub" claim).
	Subjects []string `json:"subjects,omitempty"`
	// Scopes are OAuth scopes (the "scope" claim, space separated, or a
	// "scp" list).
	Scopes []string `json:"scopes,omitempty"`
	// Commands are command types (CreateTodo, …) the identity may send.
	Commands []string `json:"commands,omitempty"`
	// Read are resources (todo, orders, analytics, status, metrics) the
	// identity may read with GET or HEAD.
	Read []string `json:"read,omitempty"`
	// Write are resources other than command APIs (analytics ingestion)
	// the identity may send other methods to. The todo API does not look
	// at it: its writes are commands.
	Write []string `json:"write,omitempty"`
	// On says what the rule's grants apply to: OnAny (the default) every
	// aggregate or record of the resource, OnOwn only those the identity
	// owns (the todos it created, its own analytics user id). An "own"
	// grant of a resource that has no owners (orders, status, metrics)
	// allows nothing.
	On string `json:"on,omitempty"`
	// Sources, when set, limits the rule to these analytics sources: it
	// may then grant only Read and Write of "analytics".
	Sources []string `json:"sources,omitempty"`
	// Admin grants every command type, read and write, on everything.
	Admin bool `json:"admin,omitempty"`
}

// What a Rule's grants apply to (Rule.On).
const (
	OnAny = "any"
	OnOwn = "own"
)

// AnalyticsResource is the resource of the analytics routes
// (/sources/… and /users/…), the one resource Rule.Sources limits.
const AnalyticsResource = "analytics"

// Validate reports the first rule that applies to nobody, grants nothing
// or is ambiguous, as a *eventstore.ValidationError.
func (p Policy) Validate() error {
	for i, r := range p.Rules {
		field := fmt.Sprintf("rules[%d]", i)
		invalid := func(reason string) error { return &eventstore.ValidationError{Field: field, Reason: reason} }
		switch {
		case len(r.Subjects) == 0 && len(r.Scopes) == 0:
			return invalid("has neither subjects nor scopes: it applies to nobody")
		case !r.Admin && len(r.Commands) == 0 && len(r.Read) == 0 && len(r.Write) == 0:
			return invalid("grants no commands, reads or writes (nor admin)")
		case r.On != "" && r.On != OnAny && r.On != OnOwn:
			return invalid(fmt.Sprintf("on %q: want %q or %q", r.On, OnAny, OnOwn))
		case r.Admin && (r.On == OnOwn || len(r.Sources) > 0):
			return invalid(`admin grants everything on everything: it takes neither "on": "own" nor sources`)
		case len(r.Sources) > 0 && r.On == OnOwn:
			return invalid(`sources and "on": "own" do not combine: write one rule for each`)
		case len(r.Sources) > 0 && (len(r.Commands) > 0 || slices.ContainsFunc(append(slices.Clone(r.Read), r.Write...), func(s string) bool { return s != AnalyticsResource })):
			return invalid(`sources limit only the analytics resource: such a rule grants only "read" and "write" of "analytics"`)
		case slices.Contains(r.Sources, ""):
			return invalid("sources holds an empty source id")
		}
	}
	return nil
}

// CheckNames reports the first command type or resource a rule names
// that is not among the known ones ("*" aside), as a
// *eventstore.ValidationError: a misspelt or retired name would
// otherwise grant nothing without a word.
func (p Policy) CheckNames(commandTypes, resources []string) error {
	for i, r := range p.Rules {
		for _, c := range r.Commands {
			if c != "*" && !slices.Contains(commandTypes, c) {
				return &eventstore.ValidationError{Field: fmt.Sprintf("rules[%d].commands", i),
					Reason: fmt.Sprintf("%q is not a command type of this deployment (%s)", c, strings.Join(commandTypes, ", "))}
			}
		}
		for _, res := range append(slices.Clone(r.Read), r.Write...) {
			if res != "*" && !slices.Contains(resources, res) {
				reason := fmt.Sprintf("%q is not a resource of this deployment (%s)", res, strings.Join(resources, ", "))
				if res == "sources" || res == "users" {
					reason += `; the analytics routes /sources/… and /users/… are the resource "analytics"`
				}
				return &eventstore.ValidationError{Field: fmt.Sprintf("rules[%d]", i), Reason: reason}
			}
		}
	}
	return nil
}

// LoadPolicy reads and validates a policy file. Unknown fields are
// refused, so a misspelt key does not silently grant less (or more).
func LoadPolicy(path string) (*Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: policy: %w", err)
	}
	var p Policy
	if err := eventstore.DecodeStrict("auth policy "+path, b, &p); err != nil {
		return nil, fmt.Errorf("auth: policy: %w", err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("auth: policy %s: %w", path, err)
	}
	return &p, nil
}

// Grant is what a policy grants one identity on one command type or
// resource: the union of what every rule that applies grants.
type Grant struct {
	// Any: on everything.
	Any bool
	// Own: on what the identity owns (OwnedBy).
	Own bool
	// Sources: on these analytics sources.
	Sources []string

	subject string
}

// Allowed reports whether the grant allows anything at all.
func (g Grant) Allowed() bool { return g.Any || g.Own || len(g.Sources) > 0 }

// OwnedBy reports whether the grant covers something owned by owner:
// always with Any, with Own when owner is the identity's subject (an
// aggregate without an owner is covered only by Any).
func (g Grant) OwnedBy(owner string) bool {
	return g.Any || (g.Own && owner != "" && owner == g.subject)
}

// Source reports whether the grant covers analytics source id.
func (g Grant) Source(id string) bool { return g.Any || slices.Contains(g.Sources, id) }

// Subject is the subject of the identity the grant was made to.
func (g Grant) Subject() string { return g.subject }

// GrantAll is the grant of a request when auth is off: everything.
var GrantAll = Grant{Any: true}

// Command is what p grants id on commands of type typ.
func (p *Policy) Command(id Identity, typ string) Grant {
	return p.grant(id, func(r Rule) []string { return r.Commands }, typ)
}

// Read is what p grants id on reads of resource.
func (p *Policy) Read(id Identity, resource string) Grant {
	return p.grant(id, func(r Rule) []string { return r.Read }, resource)
}

// Write is what p grants id on writes of resource other than by a
// command (see Rule.Write).
func (p *Policy) Write(id Identity, resource string) Grant {
	return p.grant(id, func(r Rule) []string { return r.Write }, resource)
}

// AllowsCommand reports whether id may send commands of type typ on
// everything (Command(…).Any).
func (p *Policy) AllowsCommand(id Identity, typ string) bool { return p.Command(id, typ).Any }

// AllowsRead reports whether id may read all of resource
// (Read(…).Any).
func (p *Policy) AllowsRead(id Identity, resource string) bool { return p.Read(id, resource).Any }

// AllowsWrite reports whether id may write all of resource
// (Write(…).Any).
func (p *Policy) AllowsWrite(id Identity, resource string) bool { return p.Write(id, resource).Any }

func (p *Policy) grant(id Identity, grants func(Rule) []string, what string) Grant {
	g := Grant{subject: id.Subject}
	if p == nil || id.Subject == "" || what == "" {
		return g
	}
	for _, r := range p.Rules {
		if !r.appliesTo(id) {
			continue
		}
		if list := grants(r); !r.Admin && !slices.Contains(list, what) && !slices.Contains(list, "*") {
			continue
		}
		switch {
		case len(r.Sources) > 0:
			for _, s := range r.Sources {
				if !slices.Contains(g.Sources, s) {
					g.Sources = append(g.Sources, s)
				}
			}
		case r.On == OnOwn:
			g.Own = true
		default:
			g.Any = true
		}
	}
	return g
}

func (r Rule) appliesTo(id Identity) bool {
	if slices.Contains(r.Subjects, id.Subject) || slices.Contains(r.Subjects, "*") {
		return true
	}
	for _, s := range id.Scopes {
		if slices.Contains(r.Scopes, s) {
			return true
		}
	}
	return false
}
