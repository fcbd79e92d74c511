package probe_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/bus/kafka/kafkatest"
	"github.com/eventpipe/eventpipe/dev/certs"
	"github.com/eventpipe/eventpipe/dev/kmsserver"
	"github.com/eventpipe/eventpipe/internal/probe"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
	"github.com/eventpipe/eventpipe/testkit/integration"
	"github.com/eventpipe/eventpipe/tlsconfig"
)

// TestKafkaProbeUsesSecurity probes an in-process TLS + SCRAM-SHA-512
// broker: the right settings pass, wrong ones fail within the probe's
// bound with an error naming the cause.
func TestKafkaProbeUsesSecurity(t *testing.T) {
	files, err := certs.WriteServer(t.TempDir(), "probe test CA", "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	cert, caFile := files.Cert, files.CAFile
	brokers := kafkatest.StartCluster(t, kafkatest.ClusterConfig{Certificate: &cert,
		Users: []kafkatest.User{{Mechanism: kafka.SASLScramSHA512, Name: "probe", Password: "pw"}}})
	good := kafka.Security{TLS: tlsconfig.Config{CAFile: caFile}, SASL: kafka.SASL{Mechanism: kafka.SASLScramSHA512, Username: "probe", Password: "pw"}}

	ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
	defer cancel()
	if err := probe.Kafka(ctx, brokers, good); err != nil {
		t.Fatalf("probe with the right settings: %v", err)
	}

	wrongPassword := good
	wrongPassword.SASL.Password = "wrong"
	plainText := good
	plainText.TLS = tlsconfig.Config{}
	for name, c := range map[string]struct {
		sec  kafka.Security
		want string
	}{
		"wrong password": {wrongPassword, "SCRAM-SHA-512"},
		"plain text":     {plainText, "TLS"},
		"no security":    {kafka.Security{}, "plaintext"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), integration.HangAfter())
			defer cancel()
			err := probe.Kafka(ctx, brokers, c.sec)
			if err == nil {
				t.Fatal("probe passed with wrong settings")
			}
			if ctx.Err() != nil {
				t.Fatalf("probe failed only when its context ended: %v", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error does not mention %q: %v", c.want, err)
			}
		})
	}
	if err := probe.Kafka(ctx, brokers, kafka.Security{SASL: kafka.SASL{Mechanism: "NOPE"}}); err == nil {
		t.Fatal("probe accepted an invalid Security")
	}
}

// TestProbeErrorsCarryNoPassword: a failed probe of an Elasticsearch or
// Postgres URL holding a password names the URL with it masked.
func TestProbeErrorsCarryNoPassword(t *testing.T) {
	ctx := context.Background()
	port := strconv.Itoa(integration.FreePort(t)) // nothing listens
	for name, err := range map[string]error{
		"elasticsearch": probe.Elasticsearch(ctx, "http://elastic:s3cretPW@127.0.0.1:"+port, esclient.Security{}),
		"postgres":      probe.Postgres(ctx, "postgres://u:s3cretPW@127.0.0.1:"+port+"/db?sslmode=disable"),
	} {
		if err == nil || strings.Contains(err.Error(), "s3cretPW") || !strings.Contains(err.Error(), "127.0.0.1:"+port) {
			t.Errorf("%s probe of a closed port: %v; want an error naming the address without the password", name, err)
		}
	}
}

// TestKMSProbeMakesAKMSCall probes the stack's KMS handler: it passes;
// a server that answers HTTP but is no KMS, and a closed port, fail with
// an error naming the address.
func TestKMSProbeMakesAKMSCall(t *testing.T) {
	ctx := context.Background()
	db, err := kmsserver.Open(kmsserver.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	kms := httptest.NewServer(kmsserver.Handler(db, slog.New(slog.DiscardHandler)))
	defer kms.Close()
	if err := probe.KMS(ctx, kms.URL); err != nil {
		t.Fatalf("probe of the KMS: %v", err)
	}
	notKMS := httptest.NewServer(http.NotFoundHandler())
	defer notKMS.Close()
	closed := "http://127.0.0.1:" + strconv.Itoa(integration.FreePort(t))
	for name, url := range map[string]string{"not a KMS": notKMS.URL, "closed port": closed} {
		if err := probe.KMS(ctx, url); err == nil || !strings.Contains(err.Error(), url) {
			t.Errorf("%s: probe = %v, want an error naming %s", name, err, url)
		}
	}
}
