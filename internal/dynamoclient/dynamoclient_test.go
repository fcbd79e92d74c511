package dynamoclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
)

// TestRoleARNAssumesTheRoleWithTheDefaultChainsCredentials points the STS
// endpoint at a local server answering AssumeRole as STS does: the
// credentials of the AWS client are the role's, got by a request signed
// with the default chain's (here the environment's) keys that names the
// role and the session.
func TestRoleARNAssumesTheRoleWithTheDefaultChainsCredentials(t *testing.T) {
	isolateAWSEnv(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDBASEEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "base-secret")
	const role = "arn:aws:iam::123456789012:role/eventpipe-writer"
	var mu sync.Mutex
	var form, authz string
	sts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		mu.Lock()
		form, authz = r.PostForm.Encode(), r.Header.Get("Authorization")
		mu.Unlock()
		w.Header().Set("Content-Type", "text/xml")
		_, _ = w.Write([]byte(`<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleResult>
    <Credentials>
      <AccessKeyId>ASIAROLEEXAMPLE</AccessKeyId>
      <SecretAccessKey>role-secret</SecretAccessKey>
      <SessionToken>role-session-token</SessionToken>
      <Expiration>2099-01-01T00:00:00Z</Expiration>
    </Credentials>
    <AssumedRoleUser>
      <Arn>arn:aws:sts::123456789012:assumed-role/eventpipe-writer/eventpipe</Arn>
      <AssumedRoleId>AROAEXAMPLE:eventpipe</AssumedRoleId>
    </AssumedRoleUser>
  </AssumeRoleResult>
  <ResponseMetadata><RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId></ResponseMetadata>
</AssumeRoleResponse>`))
	}))
	t.Cleanup(sts.Close)

	cfg, err := AWSConfig(context.Background(), Config{Endpoint: AWSEndpoint, Region: "eu-west-1", RoleARN: role, STSEndpoint: sts.URL})
	if err != nil {
		t.Fatal(err)
	}
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if creds.AccessKeyID != "ASIAROLEEXAMPLE" || creds.SecretAccessKey != "role-secret" || creds.SessionToken != "role-session-token" {
		t.Fatalf("credentials %s/%s; want the assumed role's", creds.AccessKeyID, creds.SessionToken)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"Action=AssumeRole", "RoleArn=" + strings.ReplaceAll(strings.ReplaceAll(role, ":", "%3A"), "/", "%2F"), "RoleSessionName=eventpipe"} {
		if !strings.Contains(form, want) {
			t.Errorf("AssumeRole request %q lacks %s", form, want)
		}
	}
	if !strings.Contains(authz, "Credential=AKIDBASEEXAMPLE/") {
		t.Errorf("AssumeRole request signed with %q; want the default chain's key AKIDBASEEXAMPLE", authz)
	}
}

// TestRoleARNIsRefusedWhereItCannotWork: a role with a local endpoint
// (DynamoDB Local takes static credentials) and a value that is not an
// ARN are validation errors.
func TestRoleARNIsRefusedWhereItCannotWork(t *testing.T) {
	isolateAWSEnv(t)
	for name, cfg := range map[string]Config{
		"local endpoint": {Endpoint: "http://127.0.0.1:8000", RoleARN: "arn:aws:iam::123456789012:role/x"},
		"not an ARN":     {Endpoint: AWSEndpoint, Region: "eu-west-1", RoleARN: "eventpipe-writer"},
	} {
		var verr *eventstore.ValidationError
		if _, err := AWSConfig(context.Background(), cfg); !errors.As(err, &verr) || verr.Field != "RoleARN" {
			t.Errorf("%s: %v; want a ValidationError on RoleARN", name, err)
		}
	}
}

// isolateAWSEnv keeps the machine's AWS files and metadata service out of
// the test.
func isolateAWSEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_ROLE_ARN", "")
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "")
}
