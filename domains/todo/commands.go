package todo

import (
	"strings"

	"github.com/eventpipe/eventpipe/commands"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/privacy"
)

// Command types.
const (
	CreateTodo = "CreateTodo" // payload TodoData
	UpdateTodo = "UpdateTodo" // payload TodoData
	DeleteTodo = "DeleteTodo" // payload {}
)

// Command definitions: each command type with the Go type of its payload.
var (
	CreateTodoCommand = commands.DefineCommand[TodoData](CreateTodo)
	UpdateTodoCommand = commands.DefineCommand[TodoData](UpdateTodo)
	DeleteTodoCommand = commands.DefineCommand[struct{}](DeleteTodo)
)

// Domain describes the todo write model: its events and its commands,
// each deciding against the facet's STATE.
func Domain() commands.Domain {
	d := commands.FacetDomain(AggregateType, Processor(),
		commands.OnCommand(CreateTodoCommand, decideCreate),
		commands.OnCommand(UpdateTodoCommand, decideUpdate),
		commands.OnCommand(DeleteTodoCommand, decideDelete),
	)
	d.Personal = Personal
	d.PersonalCommands = PersonalCommands
	return d
}

// Personal is the todos' personal data (docs/privacy.md): a todo's
// title and message are its owner's, with a key per todo made when it is
// created. A todo without an owner (its creator was not verified) is its
// own subject.
var Personal = map[string]privacy.Personal{
	TodoCreated: {Subject: "/owner", OrAggregate: true, Fields: []string{"/title", "/message"}},
	TodoUpdated: {Fields: []string{"/title", "/message"}},
}

// PersonalCommands is the personal data of the todo commands' payloads,
// sealed on the bus: the title and message. A todo's key is made for its
// owner, the creator when verified (a signed command's actor, as
// OwnerOf), else the todo itself, as its TodoCreated will name it.
var PersonalCommands = map[string]privacy.Personal{
	CreateTodo: {SubjectIsActor: true, OrAggregate: true, Fields: []string{"/title", "/message"}},
	UpdateTodo: {SubjectIsActor: true, OrAggregate: true, Fields: []string{"/title", "/message"}},
}

// NewFacet returns the todo facet on store (reads of a todo's STATE, as
// the HTTP API does). upcasters may be nil.
func NewFacet(store eventstore.Store, upcasters *eventstore.Upcasters) (*eventstore.Facet[Todo], error) {
	return eventstore.NewFacet(eventstore.FacetConfig[Todo]{Store: store, AggregateType: AggregateType, Processor: Processor(), Upcasters: upcasters})
}

// Validate checks a todo's fields: a title that is not blank, at most
// MaxTitleLength bytes, a message of at most MaxMessageLength; a
// *eventstore.ValidationError naming the field. The commands decide with
// it, and the HTTP API checks a request with it before it claims an
// Idempotency-Key.
func (d TodoData) Validate() error {
	if strings.TrimSpace(d.Title) == "" {
		return &eventstore.ValidationError{Field: "title", Reason: "is empty"}
	}
	if len(d.Title) > MaxTitleLength {
		return &eventstore.ValidationError{Field: "title", Reason: "is too long"}
	}
	if len(d.Message) > MaxMessageLength {
		return &eventstore.ValidationError{Field: "message", Reason: "is too long"}
	}
	return nil
}

func decideCreate(cur eventstore.State[Todo], cmd commands.Command, d TodoData) ([]eventstore.NewEvent, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	if cur.Item.Exists || cur.Item.Deleted {
		return nil, commands.ConflictWith(ErrExists, "todo %s already exists", cmd.AggregateID)
	}
	return []eventstore.NewEvent{TodoCreatedEvent.New(TodoCreatedData{TodoData: d, Owner: OwnerOf(cmd)})}, nil
}

// OwnerOf is the owner a CreateTodo command gives the todo it creates:
// its actor when the actor was verified, "" when it was claimed.
func OwnerOf(cmd commands.Command) string {
	if (eventstore.Metadata{ActorSource: cmd.ActorSource}).ActorVerified() {
		return cmd.Actor
	}
	return ""
}

func decideUpdate(cur eventstore.State[Todo], cmd commands.Command, d TodoData) ([]eventstore.NewEvent, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	if !cur.Item.Exists {
		return nil, commands.NotFoundWith(ErrNotFound, "todo %s does not exist", cmd.AggregateID)
	}
	return []eventstore.NewEvent{TodoUpdatedEvent.New(d)}, nil
}

func decideDelete(cur eventstore.State[Todo], cmd commands.Command, _ struct{}) ([]eventstore.NewEvent, error) {
	if !cur.Item.Exists {
		return nil, commands.NotFoundWith(ErrNotFound, "todo %s does not exist", cmd.AggregateID)
	}
	return []eventstore.NewEvent{TodoDeletedEvent.New(struct{}{})}, nil
}
