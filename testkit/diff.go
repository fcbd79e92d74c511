package testkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// rawJSON returns v as JSON text: a json.RawMessage, []byte or string as
// it is, anything else encoded.
func rawJSON(v any) (json.RawMessage, error) {
	switch x := v.(type) {
	case json.RawMessage:
		return x, nil
	case []byte:
		return x, nil
	case string:
		return json.RawMessage(x), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T as JSON: %w", v, err)
	}
	return b, nil
}

// pretty returns v's JSON indented with its object keys sorted, so that
// equal JSON values print alike line for line. Text that is not JSON is
// returned as it is, marked.
func pretty(v any) string {
	raw, err := rawJSON(v)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return fmt.Sprintf("<not JSON: %q>", raw)
	}
	out, err := json.MarshalIndent(x, "", "  ")
	if err != nil {
		return fmt.Sprintf("<not JSON: %q>", raw)
	}
	return string(out)
}

// diff is a line diff of want and got: common lines indented by two
// spaces, lines only in want marked "- ", lines only in got "+ ".
func diff(want, got string) string {
	a, b := strings.Split(want, "\n"), strings.Split(got, "\n")
	// lcs[i][j] is the length of the longest common subsequence of
	// a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			out.WriteString("  " + a[i] + "\n")
			i++
			j++
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			out.WriteString("- " + a[i] + "\n")
			i++
		default:
			out.WriteString("+ " + b[j] + "\n")
			j++
		}
	}
	return out.String()
}

// mismatch is the failure message of a check: what was checked, then
// the diff of the expected and the actual rendering.
func mismatch(what, want, got string) string {
	return fmt.Sprintf("%s differ (- expected, + actual):\n%s", what, diff(want, got))
}
