package stack

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/xdg-go/scram"

	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/dev/certs"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/httpapi/auth"
	"github.com/eventpipe/eventpipe/httpapi/auth/mint"
	"github.com/eventpipe/eventpipe/internal/secretenv"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
	"github.com/eventpipe/eventpipe/tlsconfig"
)

// The secured stack's users.
const (
	// SecureKafkaUser is the Kafka SASL user of the secured stack (a
	// broker superuser), authenticating with SecureKafkaMechanism.
	SecureKafkaUser = "eventpipe"
	// SecureKafkaMechanism is the SASL mechanism of the secured stack.
	SecureKafkaMechanism = kafka.SASLScramSHA512
	// PostgresTLSRole is a role that may log in only over TLS with the
	// password in secure/postgres-password, in every mode: tests on the
	// plain stack check verify-full, a wrong password and an unknown CA
	// against it. It is a member of the URL's role (eventpipe).
	PostgresTLSRole = "eventpipe_tls"
	// ESAPIKeyName names the API key of es-credentials.json.
	ESAPIKeyName = "eventpipe"
	// LocalAuthIssuer and LocalAuthAudience are the "iss" and "aud" of
	// the tokens the stack's local key set signs (`eventpipe auth
	// token`) and `serve` requires in secure mode.
	LocalAuthIssuer   = "eventpipe-local-stack"
	LocalAuthAudience = "eventpipe"
)

// LocalAuthSubjects are the subjects secure/auth-policy.json grants
// everything when the stack writes it; `eventpipe demo` acts as the
// first. Edit the file to grant others (serve reads it at start).
var LocalAuthSubjects = []string{"demo", "dev"}

// Environment variables `eventpipe stack env` prints in secure mode,
// besides the endpoint variables it overrides.
const (
	EnvPGPassFile     = "PGPASSFILE"
	EnvKafkaTLSCAFile = kafka.EnvPrefix + "TLS_CA_FILE"    // tlsconfig.FromEnv under kafka.EnvPrefix
	EnvESCAFile       = esclient.EnvPrefix + "TLS_CA_FILE" // tlsconfig.FromEnv under esclient.EnvPrefix
	EnvESAPIKeyFile   = esclient.EnvAPIKey + secretenv.FileSuffix
)

const (
	secureDirName = "secure"
	modeFileName  = "mode"
	modeSecure    = "secure"
	modePlain     = "plain"
)

// SecureFiles are the absolute paths of the secured stack's material, all
// under <stack dir>/secure/ (folder 0700, files 0600). No value of a
// secret is kept here, only file names.
type SecureFiles struct {
	// Dir is <stack dir>/secure.
	Dir string
	// CA and CAKey are the stack's own certificate authority (ca.pem,
	// ca-key.pem), kept so that certificates can be reissued.
	CA, CAKey string
	// ServerCert and ServerKey are the server certificate every
	// component serves, for 127.0.0.1 and localhost (server.pem,
	// server-key.pem).
	ServerCert, ServerKey string
	// KafkaPassword holds the password of SecureKafkaUser
	// (kafka-password).
	KafkaPassword string
	// ESCredentials is the Elasticsearch-API server's users and API keys
	// (es-credentials.json); ESAPIKey holds the encoded API key clients
	// send, base64(id:api_key) (es-api-key).
	ESCredentials, ESAPIKey string
	// PostgresPassword holds the password of the Postgres URL's role in
	// secure mode and of PostgresTLSRole (postgres-password); PGPass is
	// a PGPASSFILE carrying it for the stack's port (pgpass).
	PostgresPassword, PGPass string
	// AuthKeys is the local key set with its private key, which signs
	// the HTTP API's tokens (auth-keys.json); AuthJWKS is its public
	// half, the JWKS `serve` verifies with (auth-jwks.json); AuthPolicy
	// is the policy `serve` authorizes with (auth-policy.json, granting
	// LocalAuthSubjects everything until you edit it).
	AuthKeys, AuthJWKS, AuthPolicy string
}

func (f SecureFiles) all() []string {
	return []string{f.CA, f.CAKey, f.ServerCert, f.ServerKey, f.KafkaPassword, f.ESCredentials, f.ESAPIKey, f.PostgresPassword, f.PGPass,
		f.AuthKeys, f.AuthJWKS, f.AuthPolicy}
}

// secureFiles returns the paths under dir/secure without looking at them.
func secureFiles(dir string) SecureFiles {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	d := filepath.Join(dir, secureDirName)
	return SecureFiles{
		Dir:              d,
		CA:               filepath.Join(d, "ca.pem"),
		CAKey:            filepath.Join(d, "ca-key.pem"),
		ServerCert:       filepath.Join(d, "server.pem"),
		ServerKey:        filepath.Join(d, "server-key.pem"),
		KafkaPassword:    filepath.Join(d, "kafka-password"),
		ESCredentials:    filepath.Join(d, "es-credentials.json"),
		ESAPIKey:         filepath.Join(d, "es-api-key"),
		PostgresPassword: filepath.Join(d, "postgres-password"),
		PGPass:           filepath.Join(d, "pgpass"),
		AuthKeys:         filepath.Join(d, "auth-keys.json"),
		AuthJWKS:         filepath.Join(d, "auth-jwks.json"),
		AuthPolicy:       filepath.Join(d, "auth-policy.json"),
	}
}

// SecureMaterial returns the absolute paths of the secured material of
// the stack in dir, failing when any file is missing (a `stack up`
// generates them).
func SecureMaterial(dir string) (SecureFiles, error) {
	f := secureFiles(dir)
	var missing []string
	for _, p := range f.all() {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, filepath.Base(p))
		}
	}
	if len(missing) > 0 {
		return f, fmt.Errorf("stack: secure material missing in %s: %s (run `eventpipe stack up`)", f.Dir, strings.Join(missing, ", "))
	}
	return f, nil
}

// SecureExports returns the environment variables through which clients
// reach the secured stack in dir whose endpoints are ep: the Postgres URL
// with sslmode=verify-full against the stack's CA and PGPASSFILE, Kafka's
// CA and SASL user with its password file, the https Elasticsearch URL
// with its CA and API-key file, and the HTTP API's JWT auth (the local
// issuer and audience, the public JWKS and the policy). Values are file
// paths and addresses, never secrets.
func SecureExports(dir string, ep endpoints.Endpoints) ([][2]string, error) {
	f, err := SecureMaterial(dir)
	if err != nil {
		return nil, err
	}
	pgURL, err := securePostgresURL(ep.Postgres, f.CA)
	if err != nil {
		return nil, err
	}
	esURL := ep.Elasticsearch
	if u, err := url.Parse(esURL); err == nil && u.Host != "" {
		esURL = "https://" + u.Host
	}
	return [][2]string{
		{endpoints.EnvPostgres, pgURL},
		{EnvPGPassFile, f.PGPass},
		{EnvKafkaTLSCAFile, f.CA},
		{kafka.EnvSASLMechanism, SecureKafkaMechanism},
		{kafka.EnvSASLUsername, SecureKafkaUser},
		{kafka.EnvSASLPasswordFile, f.KafkaPassword},
		{endpoints.EnvElasticsearch, esURL},
		{EnvESCAFile, f.CA},
		{EnvESAPIKeyFile, f.ESAPIKey},
		{auth.EnvIssuer, LocalAuthIssuer},
		{auth.EnvAudience, LocalAuthAudience},
		{auth.EnvJWKSFile, f.AuthJWKS},
		{auth.EnvPolicyFile, f.AuthPolicy},
	}, nil
}

// secureOnlyVars are the variables SecureExports sets that no endpoint
// does: in plain mode `stack env` unsets them, so that evaluating it after
// a switch from secure mode leaves no TLS, SASL or JWT setting behind.
func secureOnlyVars() []string {
	return []string{EnvPGPassFile, EnvKafkaTLSCAFile, kafka.EnvSASLMechanism, kafka.EnvSASLUsername, kafka.EnvSASLPasswordFile,
		EnvESCAFile, EnvESAPIKeyFile, auth.EnvIssuer, auth.EnvAudience, auth.EnvJWKSFile, auth.EnvPolicyFile}
}

// securePostgresURL is rawURL's user, host, port and database with
// sslmode=verify-full and sslrootcert=caFile (the password comes from
// PGPASSFILE).
func securePostgresURL(rawURL, caFile string) (string, error) {
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		return "", fmt.Errorf("stack: %s: %w", endpoints.EnvPostgres, err)
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(cfg.User),
		Host:     net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))),
		Path:     "/" + cfg.Database,
		RawQuery: "sslmode=verify-full&sslrootcert=" + strings.ReplaceAll(url.QueryEscape(caFile), "%2F", "/"),
	}
	return u.String(), nil
}

// EnvLines are the lines of `eventpipe stack env`: export lines of the
// endpoints, and in secure mode of the variables of SecureExports
// (replacing the plain Postgres and Elasticsearch URLs in place); in plain
// mode a last line unsets the variables only secure mode sets.
func (s *Stack) EnvLines() ([]string, error) {
	ep := s.Endpoints()
	ep.StackDir = s.Dir()
	lines := ep.Exports()
	if !s.Secure() {
		return append(lines, "unset "+strings.Join(secureOnlyVars(), " ")), nil
	}
	kv, err := SecureExports(s.Dir(), ep)
	if err != nil {
		return nil, err
	}
	extra := endpoints.ExportLines(kv)
	used := make([]bool, len(kv))
	for i, line := range lines {
		for j, p := range kv {
			if strings.HasPrefix(line, "export "+p[0]+"=") {
				lines[i], used[j] = extra[j], true
			}
		}
	}
	for j := range kv {
		if !used[j] {
			lines = append(lines, extra[j])
		}
	}
	return lines, nil
}

// kafkaSecurity is how the stack's own probes reach the secured broker.
func kafkaSecurity(f SecureFiles) (kafka.Security, error) {
	pw, err := readSecret(f.KafkaPassword)
	if err != nil {
		return kafka.Security{}, err
	}
	return kafka.Security{
		TLS:  tlsconfig.Config{CAFile: f.CA},
		SASL: kafka.SASL{Mechanism: SecureKafkaMechanism, Username: SecureKafkaUser, Password: pw},
	}, nil
}

// readSecret returns a secret file's content, trimmed; errors name the
// file, never its content.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("stack: read secret: %w", err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("stack: secret file %s is empty", path)
	}
	return v, nil
}

// ensureSecureMaterial creates what is missing under dir/secure: the CA,
// the server certificate (reissued with a new CA), the passwords, the
// Elasticsearch credentials and API key, the HTTP API's local key set and
// its policy. The pgpass file is rewritten for
// the current Postgres user and port. Existing secrets are kept.
func ensureSecureMaterial(dir, pgUser string, pgPort uint16) (SecureFiles, error) {
	f := secureFiles(dir)
	if err := os.MkdirAll(f.Dir, 0o700); err != nil {
		return f, fmt.Errorf("stack: %w", err)
	}
	if err := os.Chmod(f.Dir, 0o700); err != nil {
		return f, fmt.Errorf("stack: %w", err)
	}
	newCA := false
	var ca *certs.CA
	if exists(f.CA) && exists(f.CAKey) {
		var err error
		if ca, err = certs.LoadCA(f.CA, f.CAKey); err != nil {
			return f, err
		}
	} else {
		var err error
		if ca, err = certs.NewCA("eventpipe local stack CA"); err != nil {
			return f, err
		}
		if _, _, err := ca.WriteCA(f.Dir, "ca"); err != nil {
			return f, err
		}
		newCA = true
	}
	if newCA || !exists(f.ServerCert) || !exists(f.ServerKey) {
		pair, err := ca.Server("127.0.0.1", "localhost", "::1")
		if err != nil {
			return f, err
		}
		if _, _, err := pair.Write(f.Dir, "server"); err != nil {
			return f, err
		}
	}
	for _, p := range []string{f.KafkaPassword, f.PostgresPassword} {
		if !exists(p) {
			if err := writeSecret(p, randomToken(24)+"\n"); err != nil {
				return f, err
			}
		}
	}
	if !exists(f.ESCredentials) || !exists(f.ESAPIKey) {
		id, key := randomToken(15), randomToken(24)
		creds := map[string]any{
			"users":    map[string]string{"elastic": randomToken(24)},
			"api_keys": []map[string]string{{"id": id, "api_key": key, "name": ESAPIKeyName}},
		}
		b, err := json.MarshalIndent(creds, "", "  ")
		if err != nil {
			return f, err
		}
		if err := writeSecret(f.ESCredentials, string(b)+"\n"); err != nil {
			return f, err
		}
		if err := writeSecret(f.ESAPIKey, base64.StdEncoding.EncodeToString([]byte(id+":"+key))+"\n"); err != nil {
			return f, err
		}
	}
	if !exists(f.AuthKeys) || !exists(f.AuthJWKS) {
		if err := mint.WriteKeySet(f.AuthKeys, f.AuthJWKS); err != nil {
			return f, fmt.Errorf("stack: auth key set: %w", err)
		}
	}
	if !exists(f.AuthPolicy) {
		if err := writeSecret(f.AuthPolicy, localAuthPolicy()); err != nil {
			return f, err
		}
	}
	pw, err := readSecret(f.PostgresPassword)
	if err != nil {
		return f, err
	}
	if pgUser == "" {
		pgUser = "eventpipe"
	}
	var pgpass strings.Builder
	for _, host := range []string{"127.0.0.1", "localhost"} {
		for _, user := range []string{pgUser, PostgresTLSRole} {
			fmt.Fprintf(&pgpass, "%s:%d:*:%s:%s\n", host, pgPort, pgpassEscape(user), pgpassEscape(pw))
		}
	}
	if err := writeSecret(f.PGPass, pgpass.String()); err != nil {
		return f, err
	}
	return f, nil
}

// localAuthPolicy is the policy file the stack writes: LocalAuthSubjects
// may send every command and read and write every resource.
func localAuthPolicy() string {
	b, _ := json.MarshalIndent(auth.Policy{Rules: []auth.Rule{{
		Subjects: LocalAuthSubjects, Commands: []string{"*"}, Read: []string{"*"}, Write: []string{"*"},
	}}}, "", "  ") // never fails: plain strings
	return string(b) + "\n"
}

func pgpassEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `:`, `\:`).Replace(s)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// writeSecret writes content to path (mode 0600) through a temporary
// file, so that a reader never sees half a file.
func writeSecret(path, content string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("stack: %w", err)
	}
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		return fmt.Errorf("stack: write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("stack: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	return nil
}

// randomToken returns n random bytes, base64url encoded: safe in URLs,
// pgpass files and SCRAM.
func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// scramSHA256Verifier returns PostgreSQL's stored form of a SCRAM-SHA-256
// password, so that ALTER ROLE never carries the password itself (and
// it cannot reach the server's log).
func scramSHA256Verifier(password string) (string, error) {
	client, err := scram.SHA256.NewClient("", password, "")
	if err != nil {
		return "", fmt.Errorf("stack: scram: %w", err)
	}
	salt := make([]byte, 16)
	_, _ = rand.Read(salt) // never fails (crypto/rand)
	creds, err := client.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: 4096})
	if err != nil {
		return "", fmt.Errorf("stack: scram: %w", err)
	}
	enc := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", creds.Iters, enc(salt), enc(creds.StoredKey), enc(creds.ServerKey)), nil
}

// recordedMode reads the mode the last `stack up` in dir started in.
func recordedMode(dir string) (secure, recorded bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, modeFileName))
	if errors.Is(err, os.ErrNotExist) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("stack: read mode: %w", err)
	}
	switch strings.TrimSpace(string(b)) {
	case modeSecure:
		return true, true, nil
	case modePlain:
		return false, true, nil
	default:
		return false, false, fmt.Errorf("stack: %s holds %q, want %q or %q", filepath.Join(dir, modeFileName), strings.TrimSpace(string(b)), modeSecure, modePlain)
	}
}

func modeName(secure bool) string {
	if secure {
		return modeSecure
	}
	return modePlain
}

func writeMode(dir string, secure bool) error {
	return os.WriteFile(filepath.Join(dir, modeFileName), []byte(modeName(secure)+"\n"), 0o644)
}
