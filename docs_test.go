package eventpipe_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// snippetMark introduces a code block of the docs that is a piece of a
// file of the repository, word for word: `<!-- snippet: PATH -->` on the
// line before the block.
var snippetMark = regexp.MustCompile(`^<!-- snippet: (\S+) -->$`)

// TestDocSnippetsAreTheCode checks every marked code block of README.md
// and docs/*.md against the file it names: the code a user copies from
// the docs is code that compiles and whose tests run.
func TestDocSnippetsAreTheCode(t *testing.T) {
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, doc := range append(docs, "README.md") {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		for i := 0; i < len(lines); i++ {
			m := snippetMark.FindStringSubmatch(lines[i])
			if m == nil {
				continue
			}
			if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
				t.Errorf("%s:%d: a snippet mark must be followed by a code block", doc, i+1)
				continue
			}
			end := i + 2
			for end < len(lines) && !strings.HasPrefix(lines[end], "```") {
				end++
			}
			block := strings.Join(lines[i+2:end], "\n")
			src, err := os.ReadFile(m[1])
			if err != nil {
				t.Errorf("%s:%d: snippet of %s: %v", doc, i+1, m[1], err)
				continue
			}
			if !strings.Contains(string(src), block) {
				t.Errorf("%s:%d: the snippet is no longer in %s word for word; copy it again from the file", doc, i+1, m[1])
			}
			found++
			i = end
		}
	}
	if found == 0 {
		t.Fatal("no doc snippet found: the marks are gone, or this test reads the wrong files")
	}
}
