package esclient_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
	"github.com/eventpipe/eventpipe/tlsconfig"
)

// TestCredentialsOverHTTPAreRefusedOffLoopback: an API key, a username
// and password, or credentials in the URL over http:// to a host that is
// not loopback make NewClient fail with an *eventstore.ValidationError
// naming the credential and how to allow it; https, loopback,
// AllowCleartextCredentials (also from the environment) or no
// credentials pass.
func TestCredentialsOverHTTPAreRefusedOffLoopback(t *testing.T) {
	apiKey := esclient.Security{APIKey: "a2V5OnNlY3JldA=="}
	basic := esclient.Security{Username: "elastic", Password: "secret"}
	for name, tc := range map[string]struct {
		url   string
		sec   esclient.Security
		field string
	}{
		"api key":         {"http://es.internal:9200", apiKey, "Elasticsearch.APIKey"},
		"basic auth":      {"http://10.0.0.7:9200", basic, "Elasticsearch.Username"},
		"password in url": {"http://elastic:secret@es.internal:9200", esclient.Security{}, "URL"},
		"one node of two": {"http://127.0.0.1:9200,http://es.internal:9200", apiKey, "Elasticsearch.APIKey"},
		"https":           {"https://es.internal:9200", apiKey, ""},
		"loopback":        {"http://127.0.0.1:9200", basic, ""},
		"localhost":       {"http://localhost:9200", apiKey, ""},
		"ipv6 loopback":   {"http://[::1]:9200", apiKey, ""},
		"allowed":         {"http://es.internal:9200", esclient.Security{APIKey: apiKey.APIKey, AllowCleartextCredentials: true}, ""},
		"no credentials":  {"http://es.internal:9200", esclient.Security{}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			if strings.Contains(tc.url, ",") {
				t.Setenv(esclient.EnvPrefix+"URL", tc.url)
				tc.url = ""
			}
			_, err := esclient.NewClient(tc.url, tc.sec)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("NewClient: %v, want it accepted", err)
				}
				return
			}
			var ve *eventstore.ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.field || !strings.Contains(err.Error(), tlsconfig.EnvAllowCleartextCredentials) {
				t.Fatalf("NewClient: %v, want an *eventstore.ValidationError on %s naming %s", err, tc.field, tlsconfig.EnvAllowCleartextCredentials)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error carries the password: %v", err)
			}
		})
	}
	env := map[string]string{esclient.EnvAPIKey: apiKey.APIKey, tlsconfig.EnvAllowCleartextCredentials: "true"}
	sec, err := esclient.SecurityFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil || sec.ValidateFor("http://es.internal:9200") != nil {
		t.Errorf("SecurityFromEnv with %s=true: %+v, %v; want cleartext allowed", tlsconfig.EnvAllowCleartextCredentials, sec.AllowCleartextCredentials, err)
	}
}
