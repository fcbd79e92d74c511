package auth

import (
	"fmt"
	"os"
	"slices"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Policy says which identities may send which command types and read or
// write which resources. It denies by default: a request is allowed only
// when at least one rule applies to the identity and lists what the
// request does.
//
// Its JSON form, as a policy file holds it:
//
//	{"rules": [
//	  {"subjects": ["alice"], "commands": ["CreateTodo", "UpdateTodo"], "read": ["todo"]},
//	  {"scopes": ["todo:admin"], "commands": ["*"], "read": ["*"]}
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
	// Read are resources (the first path segment: todo, orders,
	// analytics, status, metrics) the identity may read with GET or HEAD.
	Read []string `json:"read,omitempty"`
	// Write are resources other than command APIs (analytics ingestion)
	// the identity may send other methods to. The todo API does not look
	// at it: its writes are commands.
	Write []string `json:"write,omitempty"`
}

// Validate reports the first rule that applies to nobody or grants
// nothing, as a *eventstore.ValidationError.
func (p Policy) Validate() error {
	for i, r := range p.Rules {
		if len(r.Subjects) == 0 && len(r.Scopes) == 0 {
			return &eventstore.ValidationError{Field: fmt.Sprintf("rules[%d]", i), Reason: "has neither subjects nor scopes: it applies to nobody"}
		}
		if len(r.Commands) == 0 && len(r.Read) == 0 && len(r.Write) == 0 {
			return &eventstore.ValidationError{Field: fmt.Sprintf("rules[%d]", i), Reason: "grants no commands, reads or writes"}
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

// AllowsCommand reports whether id may send commands of type typ.
func (p *Policy) AllowsCommand(id Identity, typ string) bool {
	return p.allows(id, func(r Rule) []string { return r.Commands }, typ)
}

// AllowsRead reports whether id may read resource.
func (p *Policy) AllowsRead(id Identity, resource string) bool {
	return p.allows(id, func(r Rule) []string { return r.Read }, resource)
}

// AllowsWrite reports whether id may write resource other than by a
// command (see Rule.Write).
func (p *Policy) AllowsWrite(id Identity, resource string) bool {
	return p.allows(id, func(r Rule) []string { return r.Write }, resource)
}

func (p *Policy) allows(id Identity, grants func(Rule) []string, what string) bool {
	if p == nil || id.Subject == "" || what == "" {
		return false
	}
	for _, r := range p.Rules {
		if !r.appliesTo(id) {
			continue
		}
		if g := grants(r); slices.Contains(g, what) || slices.Contains(g, "*") {
			return true
		}
	}
	return false
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
