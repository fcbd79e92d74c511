package esserver

import (
	"strconv"
	"strings"
	"time"
)

// Date math in index and alias names (Elasticsearch's
// IndexNameExpressionResolver.DateMathExpressionResolver): a name written
// <static{date_math_expr{date_format|time_zone}}static> resolves to the
// static text with each {…} block replaced by the date it computes,
// formatted with date_format (default yyyy.MM.dd) in time_zone (default
// UTC). \{ and \} escape braces.

// resolveDateMathNames resolves every item of a comma list of names.
func resolveDateMathNames(s string) (string, *esError) {
	if !strings.Contains(s, "<") {
		return s, nil
	}
	items := strings.Split(s, ",")
	for i, it := range items {
		r, err := resolveDateMathName(it, time.Now())
		if err != nil {
			return "", err
		}
		items[i] = r
	}
	return strings.Join(items, ","), nil
}

func resolveDateMathName(s string, now time.Time) (string, *esError) {
	neg := strings.HasPrefix(s, "-<")
	if neg {
		s = s[1:]
	}
	if len(s) < 2 || s[0] != '<' || s[len(s)-1] != '>' {
		if neg {
			return "-" + s, nil
		}
		return s, nil
	}
	bad := func(why string) *esError {
		return newErr(400, "element_parsing_exception", "invalid date math expression [%s]: %s", s, why)
	}
	in := s[1 : len(s)-1]
	var out strings.Builder
	if neg {
		out.WriteByte('-')
	}
	for i := 0; i < len(in); i++ {
		c := in[i]
		switch c {
		case '\\':
			if i+1 < len(in) {
				i++
				out.WriteByte(in[i])
			}
		case '}':
			return "", bad("invalid character at position [" + strconv.Itoa(i) + "]")
		case '{':
			// the block runs to the matching close brace
			depth, j := 1, i+1
			for ; j < len(in) && depth > 0; j++ {
				switch in[j] {
				case '{':
					depth++
				case '}':
					depth--
				}
			}
			if depth != 0 {
				return "", bad("missing closing brace")
			}
			block := in[i+1 : j-1]
			i = j - 1
			expr, fmtSpec := block, ""
			if k := strings.IndexByte(block, '{'); k >= 0 {
				if !strings.HasSuffix(block, "}") {
					return "", bad("invalid format")
				}
				expr, fmtSpec = block[:k], block[k+1:len(block)-1]
			}
			loc := time.UTC
			if p := strings.LastIndexByte(fmtSpec, '|'); p >= 0 {
				l, err := parseTimeZone(fmtSpec[p+1:])
				if err != nil {
					return "", bad("unknown time zone")
				}
				loc, fmtSpec = l, fmtSpec[:p]
			}
			if fmtSpec == "" {
				fmtSpec = "yyyy.MM.dd"
			}
			outFmt, err := compileDateFormat(fmtSpec)
			if err != nil {
				return "", bad("invalid format [" + fmtSpec + "]")
			}
			inFmt, _ := compileDateFormat("")
			ms, err := parseDateMath(expr, inFmt, now, false, loc)
			if err != nil {
				return "", bad(err.Error())
			}
			out.WriteString(outFmt.format(ms, loc))
		default:
			out.WriteByte(c)
		}
	}
	return out.String(), nil
}
