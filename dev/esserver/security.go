package esserver

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Credentials is the content of Config.CredentialsFile: the users that may
// authenticate with HTTP Basic authentication and the API keys that may
// authenticate with "Authorization: ApiKey base64(id:api_key)". For
// example:
//
//	{"users":{"elastic":"<password>"},
//	 "api_keys":[{"id":"<id>","api_key":"<key>","name":"eventpipe"}]}
//
// Secrets live only in this file (mode 0600 advised), never in flags or
// logs. Unknown fields are ignored.
type Credentials struct {
	// Users maps a user name to its password.
	Users map[string]string `json:"users,omitempty"`
	// APIKeys are the accepted API keys.
	APIKeys []APIKey `json:"api_keys,omitempty"`
}

// APIKey is one API key of a Credentials file, in the shape Elasticsearch's
// create API key API answers with (id, api_key, name).
type APIKey struct {
	// ID identifies the key; it is not secret.
	ID string `json:"id"`
	// Key is the secret part (Elasticsearch's "api_key").
	Key string `json:"api_key"`
	// Name is a label reported by GET /_security/_authenticate.
	Name string `json:"name,omitempty"`
	// Owner is the user name GET /_security/_authenticate reports for the
	// key (Elasticsearch reports the key's creator); default Name, or ID
	// when Name is empty.
	Owner string `json:"owner,omitempty"`
}

// Encoded returns base64(id:api_key), the "encoded" form Elasticsearch
// returns for a new key: the value of go-elasticsearch's Config.APIKey and
// of the "Authorization: ApiKey <encoded>" header.
func (k APIKey) Encoded() string {
	return base64.StdEncoding.EncodeToString([]byte(k.ID + ":" + k.Key))
}

func (k APIKey) owner() string {
	switch {
	case k.Owner != "":
		return k.Owner
	case k.Name != "":
		return k.Name
	default:
		return k.ID
	}
}

// Validate reports the first unusable entry, naming it but never a secret.
func (c Credentials) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("esserver: Credentials: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if len(c.Users) == 0 && len(c.APIKeys) == 0 {
		return bad("Users", "is empty and so is APIKeys: no users and no api_keys")
	}
	for name, pw := range c.Users {
		if name == "" || strings.Contains(name, ":") {
			return bad("Users", "user name %q is empty or contains ':'", name)
		}
		if pw == "" {
			return bad(fmt.Sprintf("Users[%q]", name), "user %q has an empty password", name)
		}
	}
	seen := map[string]bool{}
	for i, k := range c.APIKeys {
		if k.ID == "" || strings.Contains(k.ID, ":") {
			return bad(fmt.Sprintf("APIKeys[%d].ID", i), "api_keys[%d]: id %q is empty or contains ':'", i, k.ID)
		}
		if k.Key == "" {
			return bad(fmt.Sprintf("APIKeys[%d].Key", i), "api_keys[%d] (id %q): api_key is empty", i, k.ID)
		}
		if seen[k.ID] {
			return bad(fmt.Sprintf("APIKeys[%d].ID", i), "api_keys[%d]: id %q appears twice", i, k.ID)
		}
		seen[k.ID] = true
	}
	return nil
}

// LoadCredentials reads and validates a credentials file. Errors name the
// file and the faulty entry, never a secret.
func LoadCredentials(path string) (Credentials, error) {
	var c Credentials
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("esserver: read credentials file: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		// The JSON error may quote the file's content: keep only its kind.
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return c, fmt.Errorf("esserver: credentials file %s: invalid JSON at byte %d", path, se.Offset)
		case errors.As(err, &te):
			return c, fmt.Errorf("esserver: credentials file %s: field %q has the wrong type", path, te.Field)
		default:
			return c, fmt.Errorf("esserver: credentials file %s: invalid JSON", path)
		}
	}
	if err := c.Validate(); err != nil {
		var ve *eventstore.ValidationError
		if errors.As(err, &ve) {
			err = ve // the file's name says what was read: no second "esserver: Credentials:"
		}
		return c, fmt.Errorf("esserver: credentials file %s: %w", path, err)
	}
	return c, nil
}

// loadServerTLS builds the server's TLS configuration: the certificate
// chain of certFile (leaf first), followed by the certificates of caFile
// not already in it, and the key of keyFile.
func loadServerTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("esserver: load TLS certificate %s and key %s: %w", certFile, keyFile, err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("esserver: parse TLS certificate %s: %w", certFile, err)
		}
	}
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("esserver: read TLS CA file: %w", err)
		}
		added := 0
		for {
			var blk *pem.Block
			blk, b = pem.Decode(b)
			if blk == nil {
				break
			}
			if blk.Type != "CERTIFICATE" {
				continue
			}
			if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
				return nil, fmt.Errorf("esserver: TLS CA file %s: %w", caFile, err)
			}
			added++
			dup := false
			for _, have := range cert.Certificate {
				if bytes.Equal(have, blk.Bytes) {
					dup = true
					break
				}
			}
			if !dup {
				cert.Certificate = append(cert.Certificate, blk.Bytes)
			}
		}
		if added == 0 {
			return nil, fmt.Errorf("esserver: TLS CA file %s holds no PEM certificate", caFile)
		}
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
}

// The WWW-Authenticate challenges Elasticsearch 8 sends with a 401 when
// its realms are the file/native ones (Basic) and the API key service is
// on (ApiKey), in that order. Bearer is left out: this server has no token
// service (Elasticsearch adds `Bearer realm="security"` only when it is
// enabled).
//
// Elasticsearch 8.15 (the version this server reports) writes a comma
// before charset: elastic/elasticsearch#110906 "Add comma before charset
// parameter in WWW-Authenticate response header", backported to 8.15 by
// #111144; earlier 8.x wrote `Basic realm="security" charset="UTF-8"`
// (x-pack core security/support/Exceptions.java,
// DefaultAuthenticationFailureHandler.java).
const (
	challengeBasic  = `Basic realm="security", charset="UTF-8"`
	challengeAPIKey = "ApiKey"
)

// principal is who a request authenticated as.
type principal struct {
	username string
	apiKey   *APIKey // nil for a user
	authType string
}

// authenticator checks the Authorization header against a Credentials
// file, the way Elasticsearch 8's authenticator chain does for the two
// schemes it supports.
type authenticator struct {
	users map[string][32]byte // user name -> SHA-256 of the password
	keys  []keyEntry
}

type keyEntry struct {
	key  APIKey
	hash [32]byte // SHA-256 of the secret
}

func newAuthenticator(c Credentials) *authenticator {
	a := &authenticator{users: map[string][32]byte{}}
	for name, pw := range c.Users {
		a.users[name] = sha256.Sum256([]byte(pw))
	}
	for _, k := range c.APIKeys {
		a.keys = append(a.keys, keyEntry{key: k, hash: sha256.Sum256([]byte(k.Key))})
	}
	return a
}

// authError is Elasticsearch's 401 security_exception: the challenges are
// sent as WWW-Authenticate headers and repeated in the body's "header"
// object, as ElasticsearchSecurityException renders them.
type authError struct {
	err        *esError
	challenges []string
}

func newAuthError(reason, unsuccessful string, challenges ...string) *authError {
	e := newErr(http.StatusUnauthorized, "security_exception", "%s", reason).
		with("header", map[string]any{"WWW-Authenticate": challenges})
	if unsuccessful != "" {
		// Elasticsearch's metadata "es.additional_unsuccessful_credentials",
		// rendered without the "es." prefix, a string when it holds one
		// message.
		e.with("additional_unsuccessful_credentials", unsuccessful)
	}
	return &authError{err: e, challenges: challenges}
}

// authenticate returns the principal of r, or the 401 Elasticsearch 8.15
// answers. The messages come from Elasticsearch's x-pack security plugin:
//
//   - no (usable) credentials: DefaultAuthenticationFailureHandler.missingToken,
//     "missing authentication credentials for REST request [<uri>]";
//   - unknown user or wrong password: failedAuthentication,
//     "unable to authenticate user [<user>] for REST request [<uri>]";
//   - an API key that does not authenticate: AuthenticatorChain.handleNullToken,
//     "unable to authenticate with provided credentials and anonymous access
//     is not allowed for this request", with additional_unsuccessful_credentials
//     "API key: <ApiKeyService message>" ("unable to find apikey with id <id>",
//     "invalid credentials for API key [<id>]", "invalid ApiKey value");
//   - an undecodable Basic header: UsernamePasswordToken,
//     "invalid basic authentication header encoding" / "... value", raised by
//     Exceptions.authenticationError, which carries the Basic challenge only.
//
// <uri> is the request's URI as sent, query string included (RestRequest.uri()).
func (a *authenticator) authenticate(r *http.Request) (*principal, *authError) {
	uri := r.RequestURI
	if uri == "" {
		uri = r.URL.RequestURI()
	}
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	switch {
	case hasScheme(h, "ApiKey"):
		p, why := a.apiKey(strings.TrimSpace(h[len("ApiKey "):]))
		if p != nil {
			return p, nil
		}
		return nil, newAuthError("unable to authenticate with provided credentials and anonymous access is not allowed for this request",
			"API key: "+why, challengeBasic, challengeAPIKey)
	case hasScheme(h, "Basic"):
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(h[len("Basic "):]))
		if err != nil {
			return nil, newAuthError("invalid basic authentication header encoding", "", challengeBasic)
		}
		user, pass, ok := strings.Cut(string(raw), ":")
		if !ok || user == "" {
			return nil, newAuthError("invalid basic authentication header value", "", challengeBasic)
		}
		if a.checkUser(user, pass) {
			return &principal{username: user, authType: "realm"}, nil
		}
		return nil, newAuthError("unable to authenticate user ["+user+"] for REST request ["+uri+"]", "",
			challengeBasic, challengeAPIKey)
	default:
		return nil, newAuthError("missing authentication credentials for REST request ["+uri+"]", "",
			challengeBasic, challengeAPIKey)
	}
}

// hasScheme reports whether h is "<scheme> <something>", the scheme
// matched case-insensitively (go-elasticsearch sends "APIKey").
func hasScheme(h, scheme string) bool {
	return len(h) > len(scheme)+1 && strings.EqualFold(h[:len(scheme)], scheme) && h[len(scheme)] == ' '
}

// checkUser compares the password in constant time (over SHA-256 digests,
// so lengths do not leak either).
func (a *authenticator) checkUser(user, pass string) bool {
	want, ok := a.users[user]
	got := sha256.Sum256([]byte(pass))
	if !ok {
		// Spend the same time as for a known user.
		subtle.ConstantTimeCompare(got[:], got[:])
		return false
	}
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// apiKey authenticates base64(id:api_key); on failure it returns the
// message Elasticsearch's ApiKeyService gives.
func (a *authenticator) apiKey(encoded string) (*principal, string) {
	raw, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, "invalid ApiKey value"
	}
	id, secret, ok := strings.Cut(string(raw), ":")
	if !ok || id == "" {
		return nil, "invalid ApiKey value"
	}
	got := sha256.Sum256([]byte(secret))
	var found *keyEntry
	for i := range a.keys {
		if a.keys[i].key.ID == id {
			found = &a.keys[i]
		}
	}
	if found == nil {
		subtle.ConstantTimeCompare(got[:], got[:])
		return nil, "unable to find apikey with id " + id
	}
	if subtle.ConstantTimeCompare(got[:], found.hash[:]) != 1 {
		return nil, "invalid credentials for API key [" + id + "]"
	}
	k := found.key
	return &principal{username: k.owner(), apiKey: &k, authType: "api_key"}, ""
}

// handleAuthenticate is GET /_security/_authenticate: who the request
// authenticated as, in Elasticsearch's shape. Users of the credentials file
// are reported as authenticated by a file realm with the superuser role
// (this server does no authorisation), API keys by the _es_api_key realm.
func (s *Server) handleAuthenticate(rc *reqCtx, _ []string) (int, any) {
	if s.auth == nil {
		// What Elasticsearch answers with security disabled.
		return http.StatusInternalServerError, newErr(http.StatusInternalServerError, "exception",
			"Security must be explicitly enabled when using a [basic] license. Enable security by setting [xpack.security.enabled] to [true] in the elasticsearch.yml file and restart the node.")
	}
	p := rc.who
	realm := map[string]any{"name": "default_file", "type": "file"}
	roles := []string{"superuser"}
	if p.apiKey != nil {
		realm = map[string]any{"name": "_es_api_key", "type": "_es_api_key"}
		roles = []string{}
	}
	out := map[string]any{
		"username": p.username, "roles": roles, "full_name": nil, "email": nil,
		"metadata": map[string]any{}, "enabled": true,
		"authentication_realm": realm, "lookup_realm": realm,
		"authentication_type": p.authType,
	}
	if p.apiKey != nil {
		out["api_key"] = map[string]any{"id": p.apiKey.ID, "name": p.apiKey.Name}
	}
	return http.StatusOK, out
}
