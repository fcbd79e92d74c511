package esserver

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// dateFormat is a compiled Elasticsearch date format such as
// "strict_date_optional_time||epoch_millis" (the default).
type dateFormat struct {
	spec  string
	parts []datePart
}

type datePart struct {
	name   string // named format or the Java pattern
	epoch  int64  // 1 for epoch_millis, 1000 for epoch_second, 0 otherwise
	iso    bool   // the ISO-8601 "optional time" family
	layout string // Go layout for fixed patterns
}

const defaultDateFormat = "strict_date_optional_time||epoch_millis"

var namedLayouts = map[string]string{
	"strict_date": "2006-01-02", "date": "2006-01-02",
	"strict_date_hour_minute_second": "2006-01-02T15:04:05", "date_hour_minute_second": "2006-01-02T15:04:05",
	"strict_date_hour_minute": "2006-01-02T15:04", "date_hour_minute": "2006-01-02T15:04",
	"strict_date_hour": "2006-01-02T15", "date_hour": "2006-01-02T15",
	"strict_year_month": "2006-01", "year_month": "2006-01",
	"strict_year": "2006", "year": "2006",
	"basic_date": "20060102", "strict_basic_week_date": "",
	"strict_date_time_no_millis": "2006-01-02T15:04:05Z07:00", "date_time_no_millis": "2006-01-02T15:04:05Z07:00",
	"strict_hour_minute_second": "15:04:05", "hour_minute_second": "15:04:05",
}

var isoNames = map[string]bool{
	"strict_date_optional_time": true, "date_optional_time": true,
	"strict_date_optional_time_nanos": true, "strict_date_time": true, "date_time": true,
	"iso8601": true,
}

func compileDateFormat(spec string) (*dateFormat, error) {
	if spec == "" {
		spec = defaultDateFormat
	}
	df := &dateFormat{spec: spec}
	for _, p := range strings.Split(spec, "||") {
		p = strings.TrimSpace(p)
		switch {
		case p == "epoch_millis":
			df.parts = append(df.parts, datePart{name: p, epoch: 1})
		case p == "epoch_second":
			df.parts = append(df.parts, datePart{name: p, epoch: 1000})
		case isoNames[p]:
			df.parts = append(df.parts, datePart{name: p, iso: true})
		case namedLayouts[p] != "":
			df.parts = append(df.parts, datePart{name: p, layout: namedLayouts[p]})
		default:
			layout, err := javaToGoLayout(p)
			if err != nil {
				return nil, err
			}
			df.parts = append(df.parts, datePart{name: p, layout: layout})
		}
	}
	return df, nil
}

// javaToGoLayout converts the common subset of Java DateTimeFormatter
// patterns to a Go time layout.
func javaToGoLayout(p string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(p); {
		c := p[i]
		if c == '\'' {
			j := strings.IndexByte(p[i+1:], '\'')
			if j < 0 {
				return "", fmt.Errorf("unterminated quote in [%s]", p)
			}
			b.WriteString(p[i+1 : i+1+j])
			i += j + 2
			continue
		}
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			b.WriteByte(c)
			i++
			continue
		}
		j := i
		for j < len(p) && p[j] == c {
			j++
		}
		n := j - i
		var out string
		switch c {
		case 'y', 'u':
			if n == 2 {
				out = "06"
			} else {
				out = "2006"
			}
		case 'M':
			out = map[int]string{1: "1", 2: "01", 3: "Jan"}[min(n, 4)]
			if n >= 4 {
				out = "January"
			}
		case 'd':
			out = map[bool]string{true: "2", false: "02"}[n == 1]
		case 'H':
			out = "15"
		case 'h':
			out = map[bool]string{true: "3", false: "03"}[n == 1]
		case 'm':
			out = map[bool]string{true: "4", false: "04"}[n == 1]
		case 's':
			out = map[bool]string{true: "5", false: "05"}[n == 1]
		case 'S':
			out = strings.Repeat("0", n)
		case 'a':
			out = "PM"
		case 'E':
			out = map[bool]string{true: "Monday", false: "Mon"}[n >= 4]
		case 'Z':
			out = "-0700"
		case 'X':
			out = map[int]string{1: "Z07", 2: "Z0700", 3: "Z07:00"}[min(n, 3)]
		case 'x':
			out = map[int]string{1: "-07", 2: "-0700", 3: "-07:00"}[min(n, 3)]
		default:
			return "", fmt.Errorf("unsupported pattern letter [%c]", c)
		}
		b.WriteString(out)
		i = j
	}
	return b.String(), nil
}

var isoRe = regexp.MustCompile(`^([+-]?\d{4,})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2})(?::(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?)?)?)?(Z|[+-]\d{2}(?::?\d{2})?)?$`)

// parseISO parses the strict_date_optional_time family.
func parseISO(s string) (int64, bool) {
	t, ok := parseISOTime(s)
	if !ok {
		return 0, false
	}
	return t.UnixMilli(), true
}

// parseISOTime parses the strict_date_optional_time family to the
// nanosecond.
func parseISOTime(s string) (time.Time, bool) {
	m := isoRe.FindStringSubmatch(s)
	if m == nil {
		return time.Time{}, false
	}
	atoi := func(x string, def int) int {
		if x == "" {
			return def
		}
		v, _ := strconv.Atoi(x)
		return v
	}
	year := atoi(m[1], 0)
	mon, day := atoi(m[2], 1), atoi(m[3], 1)
	hh, mm, ss := atoi(m[4], 0), atoi(m[5], 0), atoi(m[6], 0)
	if mon < 1 || mon > 12 || day < 1 || day > 31 || hh > 23 || mm > 59 || ss > 59 {
		return time.Time{}, false
	}
	nanos := 0
	if m[7] != "" {
		frac := m[7] + strings.Repeat("0", 9-len(m[7]))
		nanos, _ = strconv.Atoi(frac)
	}
	loc := time.UTC
	if z := m[8]; z != "" && z != "Z" {
		sign := 1
		if z[0] == '-' {
			sign = -1
		}
		digits := strings.ReplaceAll(z[1:], ":", "")
		oh, _ := strconv.Atoi(digits[:2])
		om := 0
		if len(digits) >= 4 {
			om, _ = strconv.Atoi(digits[2:4])
		}
		loc = time.FixedZone("", sign*(oh*3600+om*60))
	}
	t := time.Date(year, time.Month(mon), day, hh, mm, ss, nanos, loc)
	if t.Day() != day { // e.g. Feb 30
		return time.Time{}, false
	}
	return t, true
}

// parse converts a JSON value to epoch milliseconds under the format.
func (df *dateFormat) parse(v any) (int64, error) {
	switch x := v.(type) {
	case json.Number:
		for _, p := range df.parts {
			if p.epoch != 0 {
				f, err := strconv.ParseFloat(string(x), 64)
				if err == nil {
					return int64(math.Floor(f * float64(p.epoch))), nil
				}
			}
		}
		return df.parseString(string(x))
	case float64:
		return int64(x), nil
	case string:
		return df.parseString(x)
	}
	return 0, fmt.Errorf("failed to parse date field [%v] with format [%s]", v, df.spec)
}

func (df *dateFormat) parseString(s string) (int64, error) {
	for _, p := range df.parts {
		switch {
		case p.epoch != 0:
			if f, err := strconv.ParseFloat(s, 64); err == nil && s != "" && !strings.ContainsAny(s, "eEIiNn") {
				return int64(math.Floor(f * float64(p.epoch))), nil
			}
		case p.iso:
			if ms, ok := parseISO(s); ok {
				return ms, nil
			}
		default:
			if t, err := time.Parse(p.layout, s); err == nil {
				return t.UnixMilli(), nil
			}
		}
	}
	return 0, fmt.Errorf("failed to parse date field [%s] with format [%s]", s, df.spec)
}

// parseNanos converts a JSON value to epoch nanoseconds under the format
// (date_nanos keeps the fraction of a millisecond that parse drops).
func (df *dateFormat) parseNanos(v any) (int64, error) {
	s, ok := scalarString(v)
	if !ok {
		return 0, fmt.Errorf("failed to parse date field [%v] with format [%s]", v, df.spec)
	}
	for _, p := range df.parts {
		switch {
		case p.epoch != 0:
			if f, err := strconv.ParseFloat(s, 64); err == nil && s != "" && !strings.ContainsAny(s, "eEIiNn") {
				whole, frac, _ := strings.Cut(strings.TrimPrefix(s, "-"), ".")
				w, _ := strconv.ParseInt(whole, 10, 64)
				unit := p.epoch * int64(time.Millisecond) // nanoseconds per unit
				n := w * unit
				if frac != "" {
					digits := len(strconv.FormatInt(unit, 10)) - 1
					frac = (frac + strings.Repeat("0", digits))[:digits]
					fn, _ := strconv.ParseInt(frac, 10, 64)
					n += fn
				}
				if f < 0 {
					n = -n
				}
				return n, nil
			}
		case p.iso:
			if t, ok := parseISOTime(s); ok {
				return t.UnixNano(), nil
			}
		default:
			if t, err := time.Parse(p.layout, s); err == nil {
				return t.UnixNano(), nil
			}
		}
	}
	return 0, fmt.Errorf("failed to parse date field [%s] with format [%s]", s, df.spec)
}

// format renders epoch millis with the first format, as Elasticsearch does
// for key_as_string and value_as_string.
func (df *dateFormat) format(ms int64, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	p := df.parts[0]
	t := time.UnixMilli(ms).In(loc)
	switch {
	case p.epoch == 1:
		return strconv.FormatInt(ms, 10)
	case p.epoch == 1000:
		return strconv.FormatInt(ms/1000, 10)
	case p.iso:
		if loc == time.UTC {
			return t.Format("2006-01-02T15:04:05.000Z")
		}
		return t.Format("2006-01-02T15:04:05.000Z07:00")
	default:
		return t.Format(p.layout)
	}
}

var slashDateRe = regexp.MustCompile(`^\d{4}/\d{2}/\d{2}( \d{2}:\d{2}:\d{2})?$`)

// looksLikeDate implements dynamic date detection for strings: full ISO
// dates (at least yyyy-MM-dd) and yyyy/MM/dd[ HH:mm:ss].
func looksLikeDate(s string) bool {
	if len(s) >= 10 && s[4] == '-' && s[7] == '-' {
		_, ok := parseISO(s)
		return ok
	}
	return slashDateRe.MatchString(s)
}

// dynamicDateField returns the mapping for a dynamically detected date.
func dynamicDateField(s string) *fieldMapping {
	fm := &fieldMapping{Type: "date", Kind: kindDate}
	if strings.Contains(s, "/") {
		fm.Format = "yyyy/MM/dd HH:mm:ss||yyyy/MM/dd||epoch_millis"
	}
	fm.dates, _ = compileDateFormat(fm.Format)
	return fm
}

var mathRe = regexp.MustCompile(`([+-])(\d+)([yMwdhHms])|/([yMwdhHms])`)

// parseDateMath resolves an Elasticsearch date-math expression ("now-1d/d",
// "2024-01-01||+1M") or a plain date to epoch millis. roundUp selects the
// end of the rounding unit (used for lte and gt).
func parseDateMath(v any, df *dateFormat, now time.Time, roundUp bool, loc *time.Location) (int64, error) {
	s, isStr := v.(string)
	if !isStr {
		return df.parse(v)
	}
	var base time.Time
	var expr string
	switch {
	case strings.HasPrefix(s, "now"):
		base, expr = now, s[3:]
	case strings.Contains(s, "||"):
		i := strings.Index(s, "||")
		ms, err := df.parseString(s[:i])
		if err != nil {
			return 0, err
		}
		base, expr = time.UnixMilli(ms), s[i+2:]
	default:
		ms, err := df.parseString(s)
		if err != nil && loc != nil {
			return 0, err
		}
		if err != nil {
			return 0, err
		}
		if loc != nil && loc != time.UTC && !hasZone(s) {
			t := time.UnixMilli(ms).UTC()
			t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), loc)
			ms = t.UnixMilli()
		}
		return ms, nil
	}
	if loc == nil {
		loc = time.UTC
	}
	t := base.In(loc)
	rest := expr
	for rest != "" {
		m := mathRe.FindStringSubmatchIndex(rest)
		if m == nil || m[0] != 0 {
			return 0, fmt.Errorf("operator not supported for date math [%s]", s)
		}
		sub := rest[m[0]:m[1]]
		if sub[0] == '/' {
			t = roundDate(t, sub[1], roundUp)
		} else {
			n, _ := strconv.Atoi(sub[1 : len(sub)-1])
			if sub[0] == '-' {
				n = -n
			}
			t = addUnit(t, sub[len(sub)-1], n)
		}
		rest = rest[m[1]:]
	}
	return t.UnixMilli(), nil
}

func hasZone(s string) bool {
	return strings.HasSuffix(s, "Z") || regexp.MustCompile(`[+-]\d{2}:?\d{2}$`).MatchString(s) && strings.Contains(s, "T")
}

func addUnit(t time.Time, unit byte, n int) time.Time {
	switch unit {
	case 'y':
		return t.AddDate(n, 0, 0)
	case 'M':
		return t.AddDate(0, n, 0)
	case 'w':
		return t.AddDate(0, 0, 7*n)
	case 'd':
		return t.AddDate(0, 0, n)
	case 'h', 'H':
		return t.Add(time.Duration(n) * time.Hour)
	case 'm':
		return t.Add(time.Duration(n) * time.Minute)
	default:
		return t.Add(time.Duration(n) * time.Second)
	}
}

func floorUnit(t time.Time, unit byte) time.Time {
	y, mo, d := t.Date()
	loc := t.Location()
	switch unit {
	case 'y':
		return time.Date(y, 1, 1, 0, 0, 0, 0, loc)
	case 'q':
		return time.Date(y, ((mo-1)/3)*3+1, 1, 0, 0, 0, 0, loc)
	case 'M':
		return time.Date(y, mo, 1, 0, 0, 0, 0, loc)
	case 'w':
		wd := (int(t.Weekday()) + 6) % 7 // Monday = 0
		return time.Date(y, mo, d-wd, 0, 0, 0, 0, loc)
	case 'd':
		return time.Date(y, mo, d, 0, 0, 0, 0, loc)
	case 'h', 'H':
		return time.Date(y, mo, d, t.Hour(), 0, 0, 0, loc)
	case 'm':
		return time.Date(y, mo, d, t.Hour(), t.Minute(), 0, 0, loc)
	default:
		return time.Date(y, mo, d, t.Hour(), t.Minute(), t.Second(), 0, loc)
	}
}

func roundDate(t time.Time, unit byte, up bool) time.Time {
	f := floorUnit(t, unit)
	if !up {
		return f
	}
	var next time.Time
	if unit == 'q' {
		next = f.AddDate(0, 3, 0)
	} else {
		next = addUnit(f, unit, 1)
	}
	return next.Add(-time.Millisecond)
}
