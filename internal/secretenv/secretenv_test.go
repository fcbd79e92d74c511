package secretenv

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/eventstore"
)

// TestLookupReadsTheFileOrTheVariableNeverBoth: the file's contents
// (trimmed) when NAME_FILE is set, NAME's value otherwise, "" when
// neither; both set is a ValidationError naming the variable, and an
// unreadable file is an error that names the variable but not a secret.
func TestLookupReadsTheFileOrTheVariableNeverBoth(t *testing.T) {
	file := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(file, []byte("  from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(kv map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
	}
	for name, c := range map[string]struct {
		env  map[string]string
		want string
	}{
		"file":    {map[string]string{"X_FILE": file}, "from-file"},
		"inline":  {map[string]string{"X": " inline "}, "inline"},
		"neither": {map[string]string{}, ""},
	} {
		got, err := Lookup(env(c.env), "X")
		if err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, c.want)
		}
	}
	var verr *eventstore.ValidationError
	if _, err := Lookup(env(map[string]string{"X": "a-secret", "X_FILE": file}), "X"); !errors.As(err, &verr) || verr.Field != "X" || strings.Contains(err.Error(), "a-secret") {
		t.Errorf("both set: %v; want a ValidationError on X without the secret", err)
	}
	if _, err := Lookup(env(map[string]string{"X_FILE": file + ".missing"}), "X"); err == nil || !strings.Contains(err.Error(), "X_FILE") {
		t.Errorf("missing file: %v; want an error naming X_FILE", err)
	}
}
