package eventpipe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/eventpipe/eventpipe"
)

// A program of its own sends a command onto the bus and waits for its
// answer. `eventpipe serve` (or a WriteSide in the same program) handles
// it.
func ExampleNewSender() {
	ctx := context.Background()
	catalog := eventpipe.Builtin()
	sender, err := eventpipe.NewSender(eventpipe.SenderConfig{Endpoints: eventpipe.EndpointsFromEnv()})
	if err != nil {
		log.Fatal(err)
	}
	defer sender.Close()
	cmd, err := catalog.NewCommand("CreateTodo", "t1", json.RawMessage(`{"title":"buy milk","message":"oat"}`))
	if err != nil {
		log.Fatal(err) // an unknown command type, or an id eventpipe cannot store
	}
	res, err := sender.SendAndWait(ctx, cmd)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Version)
}
