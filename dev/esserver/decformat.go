package esserver

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// decimalFormat is the subset of java.text.DecimalFormat patterns that
// Elasticsearch applies to numeric fields given a "format" (aggregation
// keys and values as strings): a literal prefix and suffix (quotes
// allowed), digits '#' and '0', grouping ',' and one '.'. Exponents,
// percent, per-mille, currency and negative subpatterns are refused.
type decimalFormat struct {
	prefix, suffix string
	minInt         int
	group          int // grouping size, 0 for none
	minFrac        int
	maxFrac        int
	alwaysPoint    bool
}

func compileDecimalFormat(p string) (*decimalFormat, error) {
	df := &decimalFormat{}
	var prefix, body, suffix strings.Builder
	stage := 0 // 0 prefix, 1 number, 2 suffix
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '\'' {
			j := strings.IndexByte(p[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated quote in pattern [%s]", p)
			}
			lit := p[i+1 : i+1+j]
			if lit == "" {
				lit = "'"
			}
			i += j + 1
			if stage == 1 {
				stage = 2
			}
			if stage == 0 {
				prefix.WriteString(lit)
			} else {
				suffix.WriteString(lit)
			}
			continue
		}
		switch c {
		case '#', '0', ',', '.':
			if stage == 2 {
				return nil, fmt.Errorf("malformed pattern [%s]", p)
			}
			stage = 1
			body.WriteByte(c)
			continue
		case 'E', '%', ';':
			return nil, errUnsupportedPattern(p, string(c))
		}
		if strings.HasPrefix(p[i:], "\u2030") || strings.HasPrefix(p[i:], "\u00a4") {
			return nil, errUnsupportedPattern(p, p[i:i+2])
		}
		if stage == 1 {
			stage = 2
		}
		if stage == 0 {
			prefix.WriteByte(c)
		} else {
			suffix.WriteByte(c)
		}
	}
	df.prefix, df.suffix = prefix.String(), suffix.String()
	b := body.String()
	if b == "" {
		return nil, fmt.Errorf("malformed pattern [%s]: no digits", p)
	}
	intPart, frac, hasPoint := strings.Cut(b, ".")
	if strings.ContainsAny(frac, ".,") {
		return nil, fmt.Errorf("malformed pattern [%s]", p)
	}
	if i := strings.LastIndexByte(intPart, ','); i >= 0 {
		df.group = len(intPart) - i - 1
	}
	seenZero := false
	for _, c := range intPart {
		switch c {
		case '0':
			df.minInt++
			seenZero = true
		case '#':
			if seenZero {
				return nil, fmt.Errorf("malformed pattern [%s]", p)
			}
		}
	}
	seenHash := false
	for _, c := range frac {
		switch c {
		case '0':
			if seenHash {
				return nil, fmt.Errorf("malformed pattern [%s]", p)
			}
			df.minFrac++
		case '#':
			seenHash = true
		}
		df.maxFrac++
	}
	df.alwaysPoint = hasPoint && frac == ""
	return df, nil
}

func errUnsupportedPattern(p, what string) error {
	return fmt.Errorf("[eventpipe] decimal format [%s] with [%s] is not supported by this server", p, what)
}

// format renders v as DecimalFormat does (rounding half-even).
func (df *decimalFormat) format(v float64) string {
	if math.IsNaN(v) {
		return "NaN"
	}
	neg := v < 0 || (v == 0 && math.Signbit(v))
	if math.IsInf(v, 0) {
		s := df.prefix + "∞" + df.suffix
		if neg {
			return "-" + s
		}
		return s
	}
	s := strconv.FormatFloat(math.Abs(v), 'f', df.maxFrac, 64)
	ip, fp, _ := strings.Cut(s, ".")
	fp = strings.TrimRight(fp, "0")
	for len(fp) < df.minFrac {
		fp += "0"
	}
	ip = strings.TrimLeft(ip, "0")
	for len(ip) < df.minInt {
		ip = "0" + ip
	}
	if ip == "" && fp == "" {
		ip = "0"
	}
	if df.group > 0 && len(ip) > df.group {
		var g strings.Builder
		first := len(ip) % df.group
		if first > 0 {
			g.WriteString(ip[:first])
		}
		for i := first; i < len(ip); i += df.group {
			if g.Len() > 0 {
				g.WriteByte(',')
			}
			g.WriteString(ip[i : i+df.group])
		}
		ip = g.String()
	}
	out := df.prefix + ip
	if fp != "" || df.alwaysPoint {
		out += "." + fp
	}
	out += df.suffix
	if neg {
		return "-" + out
	}
	return out
}
