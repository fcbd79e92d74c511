package esclient

import (
	"fmt"
	"strings"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/internal/secretenv"
	"github.com/eventpipe/eventpipe/tlsconfig"
)

// Environment variables SecurityFromEnv reads. A secret may instead be in
// the file named by the variable with _FILE appended
// (ELASTICSEARCH_API_KEY_FILE, ELASTICSEARCH_PASSWORD_FILE). TLS comes
// from ELASTICSEARCH_TLS_CA_FILE and the other tlsconfig.FromEnv names
// under the ELASTICSEARCH_ prefix.
const (
	EnvPrefix      = "ELASTICSEARCH_"
	EnvAPIKey      = "ELASTICSEARCH_API_KEY"
	EnvUsername    = "ELASTICSEARCH_USERNAME"
	EnvPassword    = "ELASTICSEARCH_PASSWORD"
	EnvFingerprint = "ELASTICSEARCH_CERT_FINGERPRINT"
)

// Security is how every Elasticsearch client eventpipe builds (search
// models, replay, migrate, parked, the HTTP API's reads) authenticates
// and verifies the server. The zero value sends no credentials and trusts
// the system's roots for an https URL.
type Security struct {
	// APIKey is the base64 "encoded" form of id:api_key, sent as
	// `Authorization: ApiKey …` (Elastic Cloud's usual credential).
	APIKey string
	// Username and Password are basic-auth credentials; not with APIKey.
	Username, Password string
	// TLS gives the CA to trust (Elasticsearch's http_ca.crt), a client
	// certificate and the server name.
	TLS tlsconfig.Config
	// Fingerprint pins a certificate of the server's chain by the hex
	// SHA-256 of its DER bytes (as Elasticsearch prints at first start),
	// instead of verifying the chain.
	Fingerprint string
	// AllowCleartextCredentials lets the API key or password go over
	// http:// to a host that is not loopback (ValidateFor refuses it
	// otherwise; EVENTPIPE_ALLOW_CLEARTEXT_CREDENTIALS, see tlsconfig).
	AllowCleartextCredentials bool
}

// Validate reports settings that cannot work together.
func (s Security) Validate() error {
	if s.APIKey != "" && (s.Username != "" || s.Password != "") {
		return &eventstore.ValidationError{Field: "Elasticsearch.APIKey", Reason: "set an API key or a username and password, not both"}
	}
	if (s.Username == "") != (s.Password == "") {
		return &eventstore.ValidationError{Field: "Elasticsearch.Username", Reason: "basic auth needs both a username and a password"}
	}
	if f := strings.ReplaceAll(s.Fingerprint, ":", ""); f != "" && (len(f) != 64 || strings.Trim(strings.ToLower(f), "0123456789abcdef") != "") {
		return &eventstore.ValidationError{Field: "Elasticsearch.Fingerprint", Reason: "want the hex SHA-256 of a certificate (64 hex digits)"}
	}
	return s.TLS.Validate()
}

// ValidateFor is Validate, and also refuses credentials (an API key, a
// username and password, or user:password in the URL) sent over http://
// to a node that is not loopback, unless AllowCleartextCredentials: an
// *eventstore.ValidationError naming the credential. rawURL is as
// NewClient takes it (empty: ELASTICSEARCH_URL, else DefaultURL);
// NewClient validates with it.
func (s Security) ValidateFor(rawURL string) error {
	if err := s.Validate(); err != nil {
		return err
	}
	urls, err := parseURLs(rawURL)
	if err != nil {
		return err
	}
	for _, u := range urls {
		if u.Scheme == "https" {
			continue
		}
		field := ""
		switch {
		case u.User != nil:
			field = "URL"
		case s.APIKey != "":
			field = "Elasticsearch.APIKey"
		case s.Username != "":
			field = "Elasticsearch.Username"
		default:
			continue
		}
		if err := tlsconfig.RefuseCleartext(field, "the credentials would go over "+u.Scheme+"://", "use an https:// URL",
			[]string{u.Host}, s.AllowCleartextCredentials); err != nil {
			return err
		}
	}
	return nil
}

// String describes s without its secrets, for logs.
func (s Security) String() string {
	var parts []string
	switch {
	case s.APIKey != "":
		parts = append(parts, "api key")
	case s.Username != "":
		parts = append(parts, "basic auth ("+s.Username+")")
	default:
		parts = append(parts, "no credentials")
	}
	if s.Fingerprint != "" {
		parts = append(parts, "pinned certificate")
	} else if s.TLS.CAFile != "" {
		parts = append(parts, "ca "+s.TLS.CAFile)
	}
	return strings.Join(parts, ", ")
}

// SecurityFromEnv reads a Security from the ELASTICSEARCH_* variables,
// AllowCleartextCredentials from EVENTPIPE_ALLOW_CLEARTEXT_CREDENTIALS.
func SecurityFromEnv(lookup func(string) (string, bool)) (Security, error) {
	t, err := tlsconfig.FromEnv(EnvPrefix, lookup)
	if err != nil {
		return Security{}, err
	}
	s := Security{TLS: t}
	s.Username, _ = lookup(EnvUsername)
	s.Username = strings.TrimSpace(s.Username)
	s.Fingerprint, _ = lookup(EnvFingerprint)
	s.Fingerprint = strings.ReplaceAll(strings.TrimSpace(s.Fingerprint), ":", "")
	if s.APIKey, err = secretenv.Lookup(lookup, EnvAPIKey); err != nil {
		return Security{}, err
	}
	if s.Password, err = secretenv.Lookup(lookup, EnvPassword); err != nil {
		return Security{}, err
	}
	if s.AllowCleartextCredentials, err = tlsconfig.AllowCleartextFromEnv(lookup); err != nil {
		return Security{}, err
	}
	if err := s.Validate(); err != nil {
		return Security{}, fmt.Errorf("elasticsearch settings: %w", err)
	}
	return s, nil
}
