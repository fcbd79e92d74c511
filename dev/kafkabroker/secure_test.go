package kafkabroker_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/eventpipe/eventpipe/dev/certs"
	"github.com/eventpipe/eventpipe/dev/kafkabroker"
	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/dev/testservers"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/testkit/integration"
)

// secureBroker is a broker child serving TLS and SCRAM-SHA-512.
type secureBroker struct {
	addr     string
	ca       *certs.CA
	user     string
	password string
	log      string
}

// startSecureBroker starts `eventpipe stack kafka-broker` (this test
// binary as a child) with a fresh CA's server certificate and a SCRAM
// user whose password is in a file, and waits until an authenticated
// TLS client reaches it.
func startSecureBroker(t *testing.T) *secureBroker {
	t.Helper()
	dir := t.TempDir()
	files, err := certs.WriteServer(dir, "kafkabroker test CA", "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	ca, caFile, certFile, keyFile := files.CA, files.CAFile, files.CertFile, files.KeyFile
	b := &secureBroker{
		addr: "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)),
		ca:   ca, user: "eventpipe", password: "s3cret-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		log: filepath.Join(dir, "broker.log"),
	}
	pwFile := filepath.Join(dir, "kafka-password")
	if err := os.WriteFile(pwFile, []byte(b.password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(b.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	args, env := testservers.KafkaBrokerCommand()
	cmd := exec.Command(args[0], "--addr", b.addr, "--data-dir", filepath.Join(dir, "data"), "--partitions", "3",
		"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-file", caFile,
		"--sasl-mechanism", kafkabroker.SASLScramSHA512, "--sasl-username", b.user)
	cmd.Env = append(append(os.Environ(), env...), kafkabroker.EnvSASLPasswordFile+"="+pwFile)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		if t.Failed() {
			out, _ := os.ReadFile(b.log)
			t.Logf("broker log:\n%s", out)
		}
	})
	integration.Await(t, "the secure broker at "+b.addr, func() error { return b.ping(b.clientOpts(ca, b.password)...) })
	return b
}

// clientOpts are TLS trusting ca and SCRAM-SHA-512 as the broker's user.
func (b *secureBroker) clientOpts(ca *certs.CA, password string) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(b.addr),
		kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}),
		kgo.SASL(scram.Auth{User: b.user, Pass: password}.AsSha512Mechanism()),
	}
}

// ping sends ApiVersions and Metadata, waiting at most as long as a hang
// takes (integration.HangAfter).
func (b *secureBroker) ping(opts ...kgo.Opt) error {
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	client, err := kgo.NewClient(append(opts, kgo.DialTimeout(2*time.Second))...)
	if err != nil {
		return err
	}
	defer client.Close()
	return client.Ping(ctx)
}

// TestSecureBrokerServesTLSAndSCRAM produces and consumes through a
// consumer group with the right CA and credentials, and expects every
// wrong way in to fail promptly.
func TestSecureBrokerServesTLSAndSCRAM(t *testing.T) {
	b := startSecureBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	topic, group := testenv.UniqueName(t, "secure"), testenv.UniqueName(t, "secure-group")

	producer, err := kgo.NewClient(append(b.clientOpts(b.ca, b.password), kgo.AllowAutoTopicCreation())...)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	want := []string{"one", "two", "three"}
	for _, v := range want {
		if err := producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	consumer, err := kgo.NewClient(append(b.clientOpts(b.ca, b.password),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	var got []string
	for len(got) < len(want) {
		fetches := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %v within %v (%s), want %v", got, integration.HangAfter(), integration.EnvHangAfter, want)
		}
		fetches.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	slices.Sort(got)
	if sorted := slices.Sorted(slices.Values(want)); !slices.Equal(got, sorted) {
		t.Fatalf("consumed %v, want %v", got, sorted)
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}

	for _, tc := range []struct {
		name string
		opts []kgo.Opt
		want string
	}{
		{"wrong password", b.clientOpts(b.ca, "not-the-password"), ""}, // kfake drops the connection
		{"no TLS", []kgo.Opt{kgo.SeedBrokers(b.addr), kgo.SASL(scram.Auth{User: b.user, Pass: b.password}.AsSha512Mechanism())}, ""},
		{"unknown CA", b.clientOpts(mustCA(t), b.password), "certificate"},
		{"no SASL", []kgo.Opt{kgo.SeedBrokers(b.addr), kgo.DialTLSConfig(&tls.Config{RootCAs: b.ca.Pool()})}, ""},
	} {
		err := b.ping(tc.opts...)
		if err == nil {
			t.Errorf("%s: the broker accepted the client", tc.name)
			continue
		}
		// Refused means the broker said no or hung up, not that the
		// client gave up waiting.
		if errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: no refusal, only the client's timeout: %v", tc.name, err)
		}
		if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q does not mention %q", tc.name, err, tc.want)
		}
		if strings.Contains(err.Error(), b.password) {
			t.Errorf("%s: error %q carries the password", tc.name, err)
		}
	}
}

// TestSecureBrokerGuardEvictsDeadJoiner checks that the group guard still
// sees the (decrypted) group requests of a TLS broker and that its own
// client authenticates: a member that dies while its JoinGroup waits in
// the barrier is removed at once, by the guard's LeaveGroup.
func TestSecureBrokerGuardEvictsDeadJoiner(t *testing.T) {
	b := startSecureBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	group := testenv.UniqueName(t, "guarded")
	newMember := func() *kgo.Client {
		c, err := kgo.NewClient(append(b.clientOpts(b.ca, b.password), kgo.RequestTimeoutOverhead(60*time.Second))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	admin := kadm.NewClient(newMember())
	membersOf := func() []string {
		described, err := admin.DescribeGroups(ctx, group)
		if err != nil {
			t.Fatalf("describe %s: %v", group, err)
		}
		var ids []string
		for _, m := range described[group].Members {
			ids = append(ids, m.MemberID)
		}
		return ids
	}
	join := func(c *kgo.Client, id string) (*kmsg.JoinGroupResponse, error) {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = group, id, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Topics = []string{"t"}
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", meta.AppendTo(nil)
		req.Protocols = []kmsg.JoinGroupRequestProtocol{p}
		resp, err := req.RequestWith(ctx, c)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		return resp, err
	}
	memberID := func(c *kgo.Client) string {
		resp, err := join(c, "")
		if !errors.Is(err, kerr.MemberIDRequired) {
			t.Fatalf("first JoinGroup: %v, want MEMBER_ID_REQUIRED", err)
		}
		return resp.MemberID
	}

	m1 := newMember()
	id1 := memberID(m1)
	resp, err := join(m1, id1)
	if err != nil {
		t.Fatalf("m1 join: %v", err)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = group, id1, resp.Generation
	ga := kmsg.NewSyncGroupRequestGroupAssignment()
	ga.MemberID = id1
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{ga}
	if sresp, err := sync.RequestWith(ctx, m1); err != nil || sresp.ErrorCode != 0 {
		t.Fatalf("m1 sync: %v (code %d)", err, sresp.ErrorCode)
	}

	m2 := newMember()
	id2 := memberID(m2)
	joined := make(chan error, 1)
	go func() { _, err := join(m2, id2); joined <- err }() // waits for m1 to rejoin
	integration.Await(t, "m2 to enter the group", func() error {
		if ids := membersOf(); !slices.Contains(ids, id2) {
			return fmt.Errorf("members %v", ids)
		}
		return nil
	})
	m2.Close() // dies while its JoinGroup waits
	<-joined
	if !eventually(3*time.Second, func() bool { return !slices.Contains(membersOf(), id2) }) {
		out, _ := os.ReadFile(b.log)
		t.Fatalf("the member that died waiting to join is still in the group after 3 s: %v\nbroker log:\n%s", membersOf(), out)
	}
	// The guard logs the removal after its request returns, which on a
	// loaded machine can come a moment after the group shows it.
	var out []byte
	integration.Await(t, "the guard's own client to log the member's removal", func() error {
		out, _ = os.ReadFile(b.log)
		if !strings.Contains(string(out), "removed a consumer-group member") {
			return fmt.Errorf("not in the broker log:\n%s", out)
		}
		return nil
	})
	if strings.Contains(string(out), b.password) {
		t.Fatal("the broker log carries the SASL password")
	}
}

func mustCA(t *testing.T) *certs.CA {
	t.Helper()
	ca, err := certs.NewCA("some other CA")
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// TestValidateSecurity rejects half or inconsistent TLS and SASL settings.
func TestValidateSecurity(t *testing.T) {
	base := kafkabroker.Config{Addr: "127.0.0.1:9092", DataDir: "x", Partitions: 1}
	for _, tc := range []struct {
		name  string
		mod   func(*kafkabroker.Config)
		field string // of the *eventstore.ValidationError
	}{
		{"cert without key", func(c *kafkabroker.Config) { c.TLSCertFile = "c.pem" }, "TLSKeyFile"},
		{"key without cert", func(c *kafkabroker.Config) { c.TLSKeyFile = "k.pem" }, "TLSCertFile"},
		{"CA without TLS", func(c *kafkabroker.Config) { c.TLSCAFile = "ca.pem" }, "TLSCAFile"},
		{"unknown mechanism", func(c *kafkabroker.Config) { c.SASLMechanism, c.SASLUsername, c.SASLPassword = "GSSAPI", "u", "p" }, "SASLMechanism"},
		{"no password", func(c *kafkabroker.Config) { c.SASLMechanism, c.SASLUsername = kafkabroker.SASLScramSHA512, "u" }, "SASLPassword"},
		{"no user", func(c *kafkabroker.Config) { c.SASLMechanism, c.SASLPassword = kafkabroker.SASLScramSHA512, "p" }, "SASLUsername"},
		{"user without mechanism", func(c *kafkabroker.Config) { c.SASLUsername = "u" }, "SASLMechanism"},
	} {
		cfg := base
		tc.mod(&cfg)
		err := cfg.Validate()
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: Validate() = %v, want an *eventstore.ValidationError on %s", tc.name, err, tc.field)
		}
	}
	ok := base
	ok.TLSCertFile, ok.TLSKeyFile, ok.TLSCAFile = "c.pem", "k.pem", "ca.pem"
	ok.SASLMechanism, ok.SASLUsername, ok.SASLPassword = kafkabroker.SASLScramSHA256, "u", "p"
	if err := ok.Validate(); err != nil {
		t.Errorf("a complete secure config: %v", err)
	}
}
