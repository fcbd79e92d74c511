package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/aws/aws-msk-iam-sasl-signer-go/signer"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/xdg-go/scram"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/secretenv"
	"github.com/eventpipe/eventpipe/tlsconfig"
)

// SASL mechanisms a Security can name.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
	// SASLAWSMSKIAM is Amazon MSK's IAM access control: OAUTHBEARER with
	// a token signed by AWS's aws-msk-iam-sasl-signer-go from the AWS
	// default credential chain (or AWSRoleARN).
	SASLAWSMSKIAM = "AWS_MSK_IAM"
)

// Environment variables SecurityFromEnv reads. The password may instead
// be in the file named by EVENTPIPE_KAFKA_SASL_PASSWORD_FILE.
const (
	EnvPrefix           = "EVENTPIPE_KAFKA_"
	EnvSASLMechanism    = "EVENTPIPE_KAFKA_SASL_MECHANISM"
	EnvSASLUsername     = "EVENTPIPE_KAFKA_SASL_USERNAME"
	EnvSASLPassword     = "EVENTPIPE_KAFKA_SASL_PASSWORD"
	EnvSASLAWSRegion    = "EVENTPIPE_KAFKA_SASL_AWS_REGION"
	EnvSASLAWSRoleARN   = "EVENTPIPE_KAFKA_SASL_AWS_ROLE_ARN"
	EnvSASLAWSProfile   = "EVENTPIPE_KAFKA_SASL_AWS_PROFILE"
	EnvSASLPasswordFile = EnvSASLPassword + secretenv.FileSuffix
)

// Security is how every Kafka client eventpipe builds (publisher,
// subscribers, the keyed subscriber, the Sender, the analytics
// aggregator, the lag monitor, status, group start positions, poison
// topic reads, health probes) connects:
// TLS and SASL. The zero value is plain text without authentication, as
// the local stack's default broker expects.
type Security struct {
	TLS  tlsconfig.Config
	SASL SASL
	// AllowCleartextCredentials lets SASL PLAIN or SCRAM run without TLS
	// to brokers that are not loopback (ValidateFor refuses it otherwise;
	// EVENTPIPE_ALLOW_CLEARTEXT_CREDENTIALS, see tlsconfig).
	AllowCleartextCredentials bool
}

// SASL selects the SASL mechanism and its credentials.
type SASL struct {
	// Mechanism is "" (none), SASLPlain, SASLScramSHA256, SASLScramSHA512
	// or SASLAWSMSKIAM.
	Mechanism string
	// Username and Password are the credentials of PLAIN and SCRAM.
	Username, Password string
	// AWSRegion is the MSK cluster's region (AWS_MSK_IAM; required).
	AWSRegion string
	// AWSRoleARN, when set, is a role assumed for the MSK IAM token.
	AWSRoleARN string
	// AWSProfile, when set, is the shared-config profile the token's
	// credentials come from. Not together with AWSRoleARN (the role is
	// assumed with the default credential chain, which AWS_PROFILE
	// selects).
	AWSProfile string
}

// String describes s without its secrets, for logs.
func (s Security) String() string {
	parts := []string{"plaintext"}
	if s.TLS.On() {
		parts[0] = "tls"
	}
	if s.SASL.Mechanism != "" {
		who := s.SASL.Username
		if s.SASL.Mechanism == SASLAWSMSKIAM {
			who = s.SASL.AWSRegion
		}
		parts = append(parts, "sasl "+s.SASL.Mechanism+" ("+who+")")
	}
	return strings.Join(parts, ", ")
}

// Validate reports settings that cannot work, as an
// *eventstore.ValidationError naming the field.
func (s Security) Validate() error {
	if err := s.TLS.Validate(); err != nil {
		return err
	}
	switch s.SASL.Mechanism {
	case "":
		if s.SASL.Username != "" || s.SASL.Password != "" {
			return &eventstore.ValidationError{Field: "SASL.Mechanism", Reason: "credentials are set but no mechanism"}
		}
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if s.SASL.Username == "" || s.SASL.Password == "" {
			return &eventstore.ValidationError{Field: "SASL.Username", Reason: s.SASL.Mechanism + " needs a username and a password"}
		}
	case SASLAWSMSKIAM:
		if s.SASL.AWSRegion == "" {
			return &eventstore.ValidationError{Field: "SASL.AWSRegion", Reason: "AWS_MSK_IAM needs the cluster's region"}
		}
		if s.SASL.AWSRoleARN != "" && s.SASL.AWSProfile != "" {
			return &eventstore.ValidationError{Field: "SASL.AWSProfile", Reason: "set AWSRoleARN or AWSProfile, not both (the role is assumed with the default credential chain; AWS_PROFILE selects its profile)"}
		}
		if s.SASL.Username != "" || s.SASL.Password != "" {
			return &eventstore.ValidationError{Field: "SASL.Username", Reason: "AWS_MSK_IAM takes its credentials from AWS, not a username and password"}
		}
	default:
		return &eventstore.ValidationError{Field: "SASL.Mechanism", Reason: fmt.Sprintf("%q is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, AWS_MSK_IAM", s.SASL.Mechanism)}
	}
	return nil
}

// ValidateFor is Validate, and also refuses SASL PLAIN or SCRAM without
// TLS (their password or its proof readable on the wire) when a broker
// is not loopback, unless AllowCleartextCredentials: an
// *eventstore.ValidationError naming SASL.Mechanism. Every config of this
// package that has brokers validates its Security with it.
func (s Security) ValidateFor(brokers []string) error {
	if err := s.Validate(); err != nil {
		return err
	}
	switch s.SASL.Mechanism {
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if !s.TLS.On() {
			return tlsconfig.RefuseCleartext("SASL.Mechanism", "SASL "+s.SASL.Mechanism+" would send its credentials",
				"turn TLS on ("+EnvPrefix+"TLS=1 or a CA file)", brokers, s.AllowCleartextCredentials)
		}
	}
	return nil
}

// SecurityFromEnv reads a Security from EVENTPIPE_KAFKA_TLS* (see
// tlsconfig.FromEnv) and EVENTPIPE_KAFKA_SASL_*; the password from
// EVENTPIPE_KAFKA_SASL_PASSWORD_FILE or EVENTPIPE_KAFKA_SASL_PASSWORD;
// AllowCleartextCredentials from EVENTPIPE_ALLOW_CLEARTEXT_CREDENTIALS.
func SecurityFromEnv(lookup func(string) (string, bool)) (Security, error) {
	t, err := tlsconfig.FromEnv(EnvPrefix, lookup)
	if err != nil {
		return Security{}, err
	}
	get := func(name string) string { v, _ := lookup(name); return strings.TrimSpace(v) }
	s := Security{TLS: t, SASL: SASL{
		Mechanism:  strings.ToUpper(get(EnvSASLMechanism)),
		Username:   get(EnvSASLUsername),
		AWSRegion:  get(EnvSASLAWSRegion),
		AWSRoleARN: get(EnvSASLAWSRoleARN),
		AWSProfile: get(EnvSASLAWSProfile),
	}}
	if s.SASL.Password, err = secretenv.Lookup(lookup, EnvSASLPassword); err != nil {
		return Security{}, err
	}
	if s.AllowCleartextCredentials, err = tlsconfig.AllowCleartextFromEnv(lookup); err != nil {
		return Security{}, err
	}
	return s, s.Validate()
}

// DefaultDialTimeout is the TCP connect timeout ApplySarama sets when the
// configuration has none. (franz-go's default is already 10s.)
const DefaultDialTimeout = 10 * time.Second

// mskTokenTimeout bounds one MSK IAM token request of sarama, whose
// AccessTokenProvider has no context (loading credentials may call STS or
// the instance metadata service).
const mskTokenTimeout = 10 * time.Second

// mskTokenRefresh is how long before its expiry a cached MSK IAM token is
// replaced by a new one.
const mskTokenRefresh = time.Minute

// mskSign returns a signed MSK IAM token and its expiry in Unix
// milliseconds for s. It is a variable so that tests can replace the AWS
// signer (export_test.go); production code never changes it.
var mskSign = signMSKToken

// signMSKToken asks aws-msk-iam-sasl-signer-go for a token: from the
// assumed role s.AWSRoleARN, from the profile s.AWSProfile, or from the
// default credential chain. The signing itself is local; only loading the
// credentials may call AWS (STS, instance metadata).
func signMSKToken(ctx context.Context, s SASL) (string, int64, error) {
	switch {
	case s.AWSRoleARN != "":
		return signer.GenerateAuthTokenFromRole(ctx, s.AWSRegion, s.AWSRoleARN, "eventpipe")
	case s.AWSProfile != "":
		return signer.GenerateAuthTokenFromProfile(ctx, s.AWSRegion, s.AWSProfile)
	default:
		return signer.GenerateAuthToken(ctx, s.AWSRegion)
	}
}

// mskTokens hands out MSK IAM tokens, reusing one until shortly before it
// expires, so that the connections a client opens at once share a token.
// It is safe for concurrent use.
type mskTokens struct {
	sasl SASL

	mu      sync.Mutex
	token   string
	expires time.Time
}

func newMSKTokens(s SASL) *mskTokens { return &mskTokens{sasl: s} }

// get returns a valid token, signing a new one when the cached one is
// missing or about to expire.
func (m *mskTokens) get(ctx context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.token != "" && time.Now().Before(m.expires.Add(-mskTokenRefresh)) {
		return m.token, nil
	}
	token, expiryMs, err := mskSign(ctx, m.sasl)
	if err != nil {
		return "", fmt.Errorf("kafka: sasl %s: sign token for region %s: %w", SASLAWSMSKIAM, m.sasl.AWSRegion, err)
	}
	if token == "" {
		return "", fmt.Errorf("kafka: sasl %s: the signer returned an empty token", SASLAWSMSKIAM)
	}
	m.token, m.expires = token, time.UnixMilli(expiryMs)
	return token, nil
}

// Token implements sarama.AccessTokenProvider.
func (m *mskTokens) Token() (*sarama.AccessToken, error) {
	ctx, cancel := context.WithTimeout(context.Background(), mskTokenTimeout)
	defer cancel()
	token, err := m.get(ctx)
	if err != nil {
		return nil, err
	}
	return &sarama.AccessToken{Token: token}, nil
}

// scramClient is sarama's SCRAMClient on github.com/xdg-go/scram.
type scramClient struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

// Begin starts a conversation for user.
func (c *scramClient) Begin(user, password, authzID string) error {
	client, err := c.hash.NewClient(user, password, authzID)
	if err != nil {
		return fmt.Errorf("kafka: sasl scram: %w", err)
	}
	c.conv = client.NewConversation()
	return nil
}

// Step answers the server's challenge.
func (c *scramClient) Step(challenge string) (string, error) {
	resp, err := c.conv.Step(challenge)
	if err != nil {
		return "", fmt.Errorf("kafka: sasl scram: %w", err)
	}
	return resp, nil
}

// Done reports whether the conversation is over.
func (c *scramClient) Done() bool { return c.conv.Done() }

// ApplySarama configures c's TLS and SASL from s: Net.TLS from
// s.TLS.Build(), and Net.SASL with PLAIN, SCRAM-SHA-256/512 (on
// github.com/xdg-go/scram) or, for AWS_MSK_IAM, OAUTHBEARER with tokens
// from aws-msk-iam-sasl-signer-go (each reused until a minute before it
// expires). It also sets Net.DialTimeout to DefaultDialTimeout when it is
// zero. The zero Security turns TLS and SASL off. An invalid s is an
// error wrapping its *eventstore.ValidationError; a CA or certificate
// file that cannot be read is an error naming it.
func (s Security) ApplySarama(c *sarama.Config) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("kafka: security: %w", err)
	}
	tc, err := s.TLS.Build()
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	c.Net.TLS.Enable = tc != nil
	c.Net.TLS.Config = tc
	if c.Net.DialTimeout == 0 {
		c.Net.DialTimeout = DefaultDialTimeout
	}
	if s.SASL.Mechanism == "" {
		c.Net.SASL.Enable = false
		return nil
	}
	c.Net.SASL.Enable = true
	c.Net.SASL.Handshake = true
	c.Net.SASL.Version = sarama.SASLHandshakeV1
	switch s.SASL.Mechanism {
	case SASLPlain:
		c.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		c.Net.SASL.User, c.Net.SASL.Password = s.SASL.Username, s.SASL.Password
	case SASLScramSHA256:
		c.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
		c.Net.SASL.User, c.Net.SASL.Password = s.SASL.Username, s.SASL.Password
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.SHA256} }
	case SASLScramSHA512:
		c.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		c.Net.SASL.User, c.Net.SASL.Password = s.SASL.Username, s.SASL.Password
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.SHA512} }
	case SASLAWSMSKIAM:
		c.Net.SASL.Mechanism = sarama.SASLTypeOAuth
		c.Net.SASL.TokenProvider = newMSKTokens(s.SASL)
	}
	return nil
}

// KgoOpts returns the franz-go options of s: kgo.DialTLSConfig from
// s.TLS.Build() and kgo.SASL with franz-go's plain, scram (SHA-256 or
// SHA-512) or, for AWS_MSK_IAM, oauth mechanism with tokens from
// aws-msk-iam-sasl-signer-go (as ApplySarama). The zero Security returns
// no options. Errors are as ApplySarama's.
func (s Security) KgoOpts() ([]kgo.Opt, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("kafka: security: %w", err)
	}
	tc, err := s.TLS.Build()
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	var opts []kgo.Opt
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	switch s.SASL.Mechanism {
	case SASLPlain:
		opts = append(opts, kgo.SASL(plain.Auth{User: s.SASL.Username, Pass: s.SASL.Password}.AsMechanism()))
	case SASLScramSHA256:
		opts = append(opts, kgo.SASL(kscram.Auth{User: s.SASL.Username, Pass: s.SASL.Password}.AsSha256Mechanism()))
	case SASLScramSHA512:
		opts = append(opts, kgo.SASL(kscram.Auth{User: s.SASL.Username, Pass: s.SASL.Password}.AsSha512Mechanism()))
	case SASLAWSMSKIAM:
		tokens := newMSKTokens(s.SASL)
		opts = append(opts, kgo.SASL(oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
			token, err := tokens.get(ctx)
			return oauth.Auth{Token: token}, err
		})))
	}
	return opts, nil
}

// wrapConnErr wraps the error of connecting to brokers as what, naming
// the security in use (never its secrets) and, when the broker closed the
// connection without an answer, what that usually means: brokers close
// the connection on a failed SASL authentication, and a TLS listener
// closes a plain-text one.
func (s Security) wrapConnErr(what string, brokers []string, err error) error {
	hint := ""
	if isClosedConn(err) {
		var causes []string
		if s.SASL.Mechanism != "" {
			causes = append(causes, "authentication failed (wrong credentials or SASL mechanism)")
		} else {
			causes = append(causes, "the listener wants SASL authentication")
		}
		if !s.TLS.On() {
			causes = append(causes, "the listener wants TLS")
		}
		hint = " (the broker closed the connection; possibly " + strings.Join(causes, ", or ") + ")"
	}
	return fmt.Errorf("kafka: %s on %v with %s%s: %w", what, brokers, s, hint, err)
}

// isClosedConn reports whether err is a connection the broker closed or
// reset. franz-go reports a connection that died under a request in
// flight with an unexported error ("the broker connection has died and
// the request will be retried on a new connection"), which is what a
// request racing the broker's close of an unauthenticated connection
// gets instead of EOF; it is matched by its text.
func isClosedConn(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(msg, "EOF") ||
		strings.Contains(msg, "connection reset") || strings.Contains(msg, "broken pipe") ||
		strings.Contains(msg, "broker connection has died") || strings.Contains(msg, "broker closed the connection")
}
