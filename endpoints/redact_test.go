package endpoints

import (
	"strings"
	"testing"
)

// TestRedactMasksEveryPasswordAndExportsLeaveThemOut: Redact masks the
// password of user info, of a password parameter, of a key=value
// connection string and of each URL of a list; Exports prints no URL
// with a password.
func TestRedactMasksEveryPasswordAndExportsLeaveThemOut(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:pw1@db:5432/app?sslmode=require":    "postgres://u:xxxxx@db:5432/app?sslmode=require",
		"postgres://u@db/app?password=pw1&sslmode=prefer": "postgres://u@db/app?password=xxxxx&sslmode=prefer",
		"host=db user=u password=pw1 dbname=app":          "host=db user=u password=xxxxx dbname=app",
		"http://a:pw1@es1:9200,http://es2:9200":           "http://a:xxxxx@es1:9200,http://es2:9200",
		"http://127.0.0.1:8000":                           "http://127.0.0.1:8000",
		"postgres://u@db/app":                             "postgres://u@db/app",
	} {
		got, masked := Redact(in)
		if got != want || masked != (got != in) || strings.Contains(got, "pw1") {
			t.Errorf("Redact(%q) = %q, %v; want %q", in, got, masked, want)
		}
	}
	ep := Default()
	ep.Postgres = "postgres://u:pw1@db:5432/app?sslmode=require"
	ep.Elasticsearch = "https://elastic:pw2@es:9200"
	out := strings.Join(ep.Exports(), "\n")
	if strings.Contains(out, "pw1") || strings.Contains(out, "pw2") {
		t.Errorf("Exports prints a password:\n%s", out)
	}
	if strings.Contains(out, "export "+EnvPostgres+"=") || !strings.Contains(out, "# "+EnvPostgres+"=postgres://u:xxxxx@db:5432/app?sslmode=require") {
		t.Errorf("Exports: want %s left out and shown masked in a comment:\n%s", EnvPostgres, out)
	}
}
