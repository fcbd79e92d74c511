package kafkabroker_test

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/certs"
	"github.com/eventpipe/eventpipe/dev/kafkabroker"
	"github.com/eventpipe/eventpipe/dev/testservers"
	"github.com/eventpipe/eventpipe/testkit/integration"
	"github.com/eventpipe/eventpipe/tlsconfig"
)

// TestDataFolderSwitchesBetweenPlainAndSASL runs a broker without
// security on a data folder, then with TLS and SCRAM-SHA-512 on the same
// folder, then without again: each time the configured user gets in and
// the records written before are there. kfake used to restore the users
// saved in the folder over the configured ones, so the secured broker
// had no user and refused everyone ("invalid sasl").
func TestDataFolderSwitchesBetweenPlainAndSASL(t *testing.T) {
	dataDir := t.TempDir()
	secDir := t.TempDir()
	files, err := certs.WriteServer(secDir, "kafkabroker switch test CA", "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	const user, password, topic = "eventpipe", "switch-s3cret", "switched"
	pwFile := filepath.Join(secDir, "kafka-password")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	plain := testservers.StartKafkaBroker(t, dataDir)
	produce(t, []kgo.Opt{kgo.SeedBrokers(plain.Addr)}, topic, "written in plain mode")
	plain.Kill()

	secure := testservers.StartKafkaBrokerWithConfig(t, testservers.KafkaBrokerConfig{
		DataDir: dataDir,
		Args: []string{"--tls-cert-file", files.CertFile, "--tls-key-file", files.KeyFile, "--tls-ca-file", files.CAFile,
			"--sasl-mechanism", kafkabroker.SASLScramSHA512, "--sasl-username", user},
		Env: []string{kafkabroker.EnvSASLPasswordFile + "=" + pwFile},
		Security: kafka.Security{TLS: tlsconfig.Config{CAFile: files.CAFile},
			SASL: kafka.SASL{Mechanism: kafka.SASLScramSHA512, Username: user, Password: password}},
	})
	secOpts := []kgo.Opt{
		kgo.SeedBrokers(secure.Addr),
		kgo.DialTLSConfig(&tls.Config{RootCAs: files.CA.Pool(), MinVersion: tls.VersionTLS12}),
		kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha512Mechanism()),
	}
	if got := consumeAll(t, secOpts, topic, 1); got[0] != "written in plain mode" {
		t.Fatalf("the secured broker holds %q", got)
	}
	produce(t, secOpts, topic, "written in secure mode")
	secure.Kill()

	again := testservers.StartKafkaBroker(t, dataDir)
	got := consumeAll(t, []kgo.Opt{kgo.SeedBrokers(again.Addr)}, topic, 2)
	if got[0] != "written in plain mode" || got[1] != "written in secure mode" {
		t.Fatalf("back in plain mode the topic holds %q", got)
	}
}

// produce writes value to topic (one partition key, so order is kept)
// and waits for the broker's acknowledgement.
func produce(t *testing.T, opts []kgo.Opt, topic, value string) {
	t.Helper()
	client, err := kgo.NewClient(append(opts, kgo.AllowAutoTopicCreation())...)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	if err := client.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatalf("produce %q: %v", value, err)
	}
}

// consumeAll reads topic from the start until it has n records, failing
// when they do not come within integration.HangAfter.
func consumeAll(t *testing.T, opts []kgo.Opt, topic string, n int) []string {
	t.Helper()
	client, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	var got []string
	for len(got) < n {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s before %v: %v", len(got), n, topic, integration.HangAfter(), fetches.Errors())
		}
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}
