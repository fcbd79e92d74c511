package todo

import "github.com/eventpipe/eventpipe/eventstore"

// Processor returns the todo rules. They are pure: no I/O.
func Processor() eventstore.Processor[Todo] {
	return eventstore.NewProcessor(func() Todo { return Todo{} },
		eventstore.OnEvent(TodoCreatedEvent, applyCreated),
		eventstore.OnEvent(TodoUpdatedEvent, applyUpdated),
		eventstore.OnEvent(TodoDeletedEvent, applyDeleted),
	)
}

func applyCreated(s Todo, d TodoCreatedData, _ *eventstore.Outbox) (Todo, error) {
	if s.Exists || s.Deleted {
		return s, eventstore.RejectWith(ErrExists, "todo already exists")
	}
	s.Title, s.Message, s.Completed, s.Exists, s.Owner = d.Title, d.Message, d.Completed, true, d.Owner
	return s, nil
}

func applyUpdated(s Todo, d TodoData, _ *eventstore.Outbox) (Todo, error) {
	if !s.Exists {
		return s, eventstore.RejectWith(ErrNotFound, "todo does not exist")
	}
	s.Title, s.Message, s.Completed = d.Title, d.Message, d.Completed
	return s, nil
}

func applyDeleted(s Todo, _ struct{}, _ *eventstore.Outbox) (Todo, error) {
	if !s.Exists {
		return s, eventstore.RejectWith(ErrNotFound, "todo does not exist")
	}
	s.Exists, s.Deleted = false, true
	return s, nil
}
