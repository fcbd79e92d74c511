package kafkabroker

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// SASL mechanisms the broker serves.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// EnvSASLPasswordFile names the file holding the SASL user's password.
// It is the only way the broker takes the password: a flag would show it
// in ps, and a value in the environment would leak to child processes.
const EnvSASLPasswordFile = "EVENTPIPE_KAFKA_BROKER_SASL_PASSWORD_FILE"

// tlsOn reports whether the broker serves TLS.
func (c Config) tlsOn() bool { return c.TLSCertFile != "" || c.TLSKeyFile != "" }

// saslOn reports whether the broker requires SASL.
func (c Config) saslOn() bool { return c.SASLMechanism != "" }

// validateSecurity reports the first invalid TLS or SASL field.
func (c Config) validateSecurity() error {
	switch {
	case c.TLSCertFile != "" && c.TLSKeyFile == "":
		return badConfig("TLSKeyFile", "is empty but TLSCertFile is set: TLS needs both TLSCertFile and TLSKeyFile")
	case c.TLSCertFile == "" && c.TLSKeyFile != "":
		return badConfig("TLSCertFile", "is empty but TLSKeyFile is set: TLS needs both TLSCertFile and TLSKeyFile")
	case c.TLSCAFile != "" && !c.tlsOn():
		return badConfig("TLSCAFile", "is set but TLS is not (set TLSCertFile and TLSKeyFile)")
	}
	switch c.SASLMechanism {
	case "":
		if c.SASLUsername != "" || c.SASLPassword != "" {
			return badConfig("SASLMechanism", "is empty but SASL credentials are set")
		}
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if c.SASLUsername == "" {
			return badConfig("SASLUsername", "is empty: SASL %s needs it", c.SASLMechanism)
		}
		if c.SASLPassword == "" {
			return badConfig("SASLPassword", "is empty: SASL %s needs a password (the file named by %s)", c.SASLMechanism, EnvSASLPasswordFile)
		}
	default:
		return badConfig("SASLMechanism", "%q is not one of %s, %s, %s", c.SASLMechanism, SASLPlain, SASLScramSHA256, SASLScramSHA512)
	}
	return nil
}

// passwordFromEnv fills SASLPassword from the file named by
// EnvSASLPasswordFile when SASL is on and no password was set.
func (c *Config) passwordFromEnv() error {
	if !c.saslOn() || c.SASLPassword != "" {
		return nil
	}
	file := strings.TrimSpace(os.Getenv(EnvSASLPasswordFile))
	if file == "" {
		return nil // Validate says what is missing
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("kafkabroker: read %s: %w", EnvSASLPasswordFile, err)
	}
	c.SASLPassword = strings.TrimSpace(string(b))
	return nil
}

// serverTLS loads the listener's certificate.
func (c Config) serverTLS() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("kafkabroker: load TLS certificate %s: %w", c.TLSCertFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// clientTLS is the TLS configuration of the broker's own clients (the
// group guard): it trusts TLSCAFile, or when that is empty the
// certificates of TLSCertFile (the served certificate and any chain),
// and verifies the server's name as usual.
func (c Config) clientTLS() (*tls.Config, error) {
	file := c.TLSCAFile
	if file == "" {
		file = c.TLSCertFile
	}
	pemBytes, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("kafkabroker: read CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("kafkabroker: %s holds no PEM certificate", file)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// saslMechanism is the client side of the configured SASL user.
func (c Config) saslMechanism() sasl.Mechanism {
	switch c.SASLMechanism {
	case SASLPlain:
		return plain.Auth{User: c.SASLUsername, Pass: c.SASLPassword}.AsMechanism()
	case SASLScramSHA256:
		return scram.Auth{User: c.SASLUsername, Pass: c.SASLPassword}.AsSha256Mechanism()
	case SASLScramSHA512:
		return scram.Auth{User: c.SASLUsername, Pass: c.SASLPassword}.AsSha512Mechanism()
	}
	return nil
}

// clientOpts are the kgo options with which the broker's own clients
// reach it: TLS trusting the configured CA and the SASL user.
func (c Config) clientOpts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if c.tlsOn() {
		tc, err := c.clientTLS()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if m := c.saslMechanism(); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// persistedUsersFile is where kfake keeps its SASL users in the data
// folder (persist version 1).
const persistedUsersFile = "sasl.json"

// forgetPersistedUsers removes the SASL users kfake saved in dataDir.
//
// kfake saves its users with the rest of its state (at the first start
// and at every clean stop) and, when it loads a data folder, replaces the
// users its options configure with the saved ones. A folder a broker
// without SASL wrote therefore starts a SASL broker with no user at all
// (every client is refused with "invalid sasl"), and one written before a
// password change keeps the old password. The broker's one user is its
// configuration's, so the saved users are dropped before every start;
// topics, records and committed offsets stay.
func forgetPersistedUsers(dataDir string) error {
	err := os.Remove(filepath.Join(dataDir, persistedUsersFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("kafkabroker: forget the SASL users saved in %s: %w", dataDir, err)
	}
	return nil
}
