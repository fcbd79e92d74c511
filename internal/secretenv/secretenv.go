// Package secretenv reads a secret from the environment the way every
// eventpipe setting does: from the file named by NAME_FILE (preferred: the
// secret stays out of the environment of child processes and out of `ps`)
// or from NAME itself, never from both.
package secretenv

import (
	"fmt"
	"os"
	"strings"

	"github.com/eventpipe/eventpipe/eventstore"
)

// FileSuffix is appended to a variable's name to name the file holding it.
const FileSuffix = "_FILE"

// Lookup returns the secret of name: the contents of the file named by
// name+"_FILE" (surrounding white space trimmed) or the value of name,
// "" when neither is set. Both set is an *eventstore.ValidationError; an
// unreadable file is an error naming the variable (never the secret).
func Lookup(lookup func(string) (string, bool), name string) (string, error) {
	file, _ := lookup(name + FileSuffix)
	inline, _ := lookup(name)
	file, inline = strings.TrimSpace(file), strings.TrimSpace(inline)
	switch {
	case file != "" && inline != "":
		return "", &eventstore.ValidationError{Field: name, Reason: fmt.Sprintf("both %s and %s%s are set; set one", name, name, FileSuffix)}
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read %s%s: %w", name, FileSuffix, err)
		}
		return strings.TrimSpace(string(b)), nil
	default:
		return inline, nil
	}
}
