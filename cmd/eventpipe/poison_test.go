package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/endpoints"
	pgmigrate "github.com/eventpipe/eventpipe/migrations/postgres"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/poison"
)

// TestPoisonCLIListShowAndRedriveTwice puts a command poisoned by
// Watermill's middleware on the command handlers' poison topic of a
// namespace of its own, then runs `eventpipe poison list`, `show` and
// `redrive` twice: list shows the offset, origin, reason, id and no
// redrive; show the metadata and payload; the first redrive redrives
// it, the second says it was already redriven, and list then shows who
// redrove it.
func TestPoisonCLIListShowAndRedriveTwice(t *testing.T) {
	ctx := context.Background()
	brokers := testenv.KafkaBrokers(t)
	schema, url := testenv.PostgresSchema(t, "cli")
	if _, err := pgmigrate.Migrate(ctx, pgmigrate.Config{URL: testenv.Endpoints().Postgres, Schema: schema}); err != nil {
		t.Fatal(err)
	}
	prefix := testenv.UniqueName(t, "ns") + "."
	t.Setenv(endpoints.EnvTopicPrefix, prefix)
	t.Setenv(endpoints.EnvPostgres, url)
	topics := bus.Topics{Prefix: prefix}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Logger: watermill.NopLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	m := message.NewMessage("01JPOISONCLI0000000000000A", []byte(`{"type":"CreateTodo","aggregate_id":"t9"}`))
	m.Metadata.Set(bus.MetadataPartitionKey, "t9")
	m.Metadata.Set(poison.KeyReasonPoisoned, "handler panic: boom\nstack…")
	m.Metadata.Set(poison.KeyTopicPoisoned, topics.Commands("todo"))
	m.Metadata.Set(poison.KeyHandlerPoisoned, "commands:"+topics.Commands("todo"))
	m.Metadata.Set(poison.KeySubscriberPoisoned, "sub")
	poisonTopic := topics.Poison(eventpipe.DefaultCommandGroup)
	if err := pub.Publish(poisonTopic, m); err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) (string, error) {
		t.Helper()
		var out bytes.Buffer
		cmd := poisonCommand()
		cmd.SetArgs(args)
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		err := cmd.ExecuteContext(ctx)
		return out.String(), err
	}
	out, err := run("list")
	if err != nil {
		t.Fatalf("poison list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "POISON TOPIC") {
		t.Fatalf("poison list printed:\n%s", out)
	}
	row := regexp.MustCompile(`^` + regexp.QuoteMeta(poisonTopic) + `\s+(\d+)/(\d+)\s+` + regexp.QuoteMeta(topics.Commands("todo")) +
		`\s+handler panic: boom stack…\s+01JPOISONCLI0000000000000A\s+\d+s\s+-$`)
	match := row.FindStringSubmatch(lines[1])
	if match == nil {
		t.Fatalf("poison list row:\n%s\nwant %s", lines[1], row)
	}
	pos := match[1] + "/" + match[2]

	out, err = run("show", strings.TrimPrefix(poisonTopic, prefix), match[2])
	if err != nil {
		t.Fatalf("poison show: %v\n%s", err, out)
	}
	for _, want := range []string{
		"poison topic:  " + poisonTopic + " (command handlers)",
		fmt.Sprintf("position:      partition %s, offset %s", match[1], match[2]),
		"origin:        " + topics.Commands("todo"),
		"handler:       commands:" + topics.Commands("todo"),
		"message id:    01JPOISONCLI0000000000000A",
		"key:           t9",
		"redriven:      -",
		"  partition_key: t9",
		"payload (41 bytes):\n{\"type\":\"CreateTodo\",\"aggregate_id\":\"t9\"}",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("poison show lacks %q:\n%s", want, out)
		}
	}

	out, err = run("redrive", poisonTopic, "--offset", pos, "--actor", "dave", "--reason", "fixed")
	if err != nil || !strings.Contains(out, pos+" 01JPOISONCLI0000000000000A: redriven to "+topics.Commands("todo")) {
		t.Fatalf("first redrive: %v\n%s", err, out)
	}
	out, err = run("redrive", poisonTopic, "--offset", pos, "--actor", "erin")
	if err != nil || !strings.Contains(out, "already redriven to "+topics.Commands("todo")+" by dave at") || !strings.Contains(out, "not published again") {
		t.Fatalf("second redrive: %v\n%s", err, out)
	}
	out, err = run("list", poisonTopic)
	if err != nil || !regexp.MustCompile(`done \S+ by dave$`).MatchString(strings.TrimSpace(out)) {
		t.Fatalf("poison list after the redrive: %v\n%s", err, out)
	}
	if out, err := run("redrive", poisonTopic); err == nil {
		t.Fatalf("redrive without --offset or --all succeeded:\n%s", out)
	}

	var buf bytes.Buffer
	printOperatorActions(&buf, operator.Status(ctx, operator.StatusConfig{}))
	if s := buf.String(); !strings.Contains(s, "OPERATOR ACTIONS") || !strings.Contains(s, "erin") || !strings.Contains(s, "dave") ||
		!strings.Contains(s, "1 already redriven") {
		t.Fatalf("status section:\n%s", s)
	}
}
