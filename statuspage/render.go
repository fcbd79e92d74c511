package statuspage

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eventpipe/eventpipe/httpapi"
)

//go:embed status.html
var pageSource string

var pageTemplate = template.Must(template.New("status").Funcs(template.FuncMap{
	"rate": func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
}).Parse(pageSource))

// view is what the template renders.
type view struct {
	Report
	Refresh int           // seconds; 0: no reloading
	Every   time.Duration // Config.Interval
	Kept    time.Duration // Config.History
	At      string        // the latest sample's time, RFC 3339 with milliseconds
	TookMS  int64
	// OtherErrors are the latest sample's errors but for those shown in
	// place (a relay stream's, a saga's).
	OtherErrors []string
	Totals      totals
	Relays      []relayView
	Sagas       []sagaView
	Chart       chart
	Access      *accessView // nil: no Config.Access
	// Actions are the latest sample's operator actions, newest first.
	Actions []actionView
}

// actionView is an OperatorAction as the page shows it.
type actionView struct {
	OperatorAction
	When string // RFC 3339, seconds
}

// accessView is Config.Access as the page shows it.
type accessView struct {
	Access
	Open  bool
	Rules []ruleView
}

// ruleView is an AccessRule as the page shows it.
type ruleView struct {
	Anyone   bool     // "*" in Subjects: any authenticated identity
	Subjects []string // but "*"
	Scopes   []string
	Commands grant
	Read     grant
	Write    grant
	Own      bool     // only what the identity owns
	Sources  []string // only these analytics sources
}

// grant is what a rule grants: every command type or resource ("*"), or
// those listed.
type grant struct {
	All   bool
	Items []string
}

func newAccessView(a Access) *accessView {
	if a.Mode == "" {
		return nil
	}
	v := &accessView{Access: a, Open: a.Mode == AccessOpen}
	toGrant := func(items []string) grant {
		if slices.Contains(items, "*") {
			return grant{All: true}
		}
		return grant{Items: items}
	}
	for _, r := range a.Rules {
		rv := ruleView{Anyone: slices.Contains(r.Subjects, "*"), Scopes: r.Scopes,
			Commands: toGrant(r.Commands), Read: toGrant(r.Read), Write: toGrant(r.Write), Own: r.On == "own", Sources: r.Sources}
		if r.Admin {
			rv.Commands, rv.Read, rv.Write = grant{All: true}, grant{All: true}, grant{All: true}
		}
		for _, s := range r.Subjects {
			if s != "*" {
				rv.Subjects = append(rv.Subjects, s)
			}
		}
		v.Rules = append(v.Rules, rv)
	}
	return v
}

// totals sum the groups and the throughput.
type totals struct {
	Lag, Poisoned, Parked int64
	PerMinute             float64
}

type relayView struct {
	Relay
	Leases []leaseView
}

type leaseView struct {
	Lease
	Updated    string // RFC 3339
	AgeSeconds int64  // at the sample's time
	Age        string
}

type sagaView struct {
	Saga
	FinishedTotal int64
	Outcomes      []outcome
}

type outcome struct {
	Name  string
	Count int64
}

func (p *Page) render(w http.ResponseWriter, r *http.Request, rep Report) {
	v := view{Report: rep, Every: p.cfg.Interval, Kept: p.cfg.History, Access: newAccessView(p.cfg.Access)}
	if p.cfg.Refresh > 0 {
		v.Refresh = max(int(p.cfg.Refresh.Round(time.Second)/time.Second), 1)
	}
	if s := rep.Latest; s != nil {
		v.At, v.TookMS = s.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"), s.Took.Milliseconds()
		for _, a := range s.OperatorActions {
			v.Actions = append(v.Actions, actionView{OperatorAction: a, When: a.At.UTC().Format(time.RFC3339)})
		}
		for _, g := range s.Groups {
			v.Totals.Lag += g.Lag
			v.Totals.Poisoned += g.Poisoned
			if g.Parked != nil {
				v.Totals.Parked += g.Parked.Events
			}
		}
		for _, t := range rep.Throughput {
			v.Totals.PerMinute += t.PerMinute
		}
		inPlace := map[string]bool{}
		for _, rel := range s.Relays {
			inPlace[rel.Err] = true
		}
		for _, sg := range s.Sagas {
			inPlace[sg.Err] = true
		}
		for _, e := range s.Errors {
			if !inPlace[e] {
				v.OtherErrors = append(v.OtherErrors, e)
			}
		}
		for _, rel := range s.Relays {
			rv := relayView{Relay: rel}
			for _, l := range rel.Leases {
				age := max(s.At.Sub(l.UpdatedAt), 0).Round(time.Second)
				rv.Leases = append(rv.Leases, leaseView{Lease: l, Updated: l.UpdatedAt.UTC().Format(time.RFC3339),
					AgeSeconds: int64(age / time.Second), Age: age.String()})
			}
			v.Relays = append(v.Relays, rv)
		}
		for _, sg := range s.Sagas {
			sv := sagaView{Saga: sg}
			for _, name := range slices.Sorted(maps.Keys(sg.Finished)) {
				sv.FinishedTotal += sg.Finished[name]
				sv.Outcomes = append(sv.Outcomes, outcome{Name: name, Count: sg.Finished[name]})
			}
			v.Sagas = append(v.Sagas, sv)
		}
		v.Chart = newChart(s.At, p.cfg.History, rep.Rates, rep.Throughput)
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, v); err != nil {
		httpapi.WriteServerError(w, r, http.StatusInternalServerError, "internal", fmt.Errorf("status page: render: %w", err))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

// The chart's geometry, in SVG user units.
const (
	chartWidth, chartHeight = 760, 240
	plotLeft, plotRight     = 56, 748
	plotTop, plotBottom     = 12, 212
)

// palette colours the aggregate types' lines; the total is black.
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// chart is the throughput chart: one line per aggregate type and one for
// the total, over the history window ending at the latest sample.
type chart struct {
	Width, Height int
	Left, Right   int
	Top, Bottom   int
	Points        int     // rate points drawn
	Peak          float64 // the highest total rate drawn
	Series        []series
	YTicks        []tick
	XTicks        []tick
}

type series struct {
	Name   string // an aggregate type, or "total"
	Color  string
	Points string // "x,y x,y …"
	Dots   []dot  // the points, for a line of a single point
	Last   float64
}

type dot struct{ X, Y string }

type tick struct {
	Pos   string // x or y
	Label string
}

func newChart(end time.Time, history time.Duration, points []RatePoint, types []Throughput) chart {
	c := chart{Width: chartWidth, Height: chartHeight, Left: plotLeft, Right: plotRight, Top: plotTop, Bottom: plotBottom, Points: len(points)}
	for _, p := range points {
		c.Peak = math.Max(c.Peak, p.Total)
	}
	top := niceCeil(c.Peak)
	x := func(t time.Time) float64 {
		f := 1 - end.Sub(t).Seconds()/history.Seconds()
		return plotLeft + math.Max(f, 0)*(plotRight-plotLeft)
	}
	y := func(v float64) float64 { return plotBottom - v/top*(plotBottom-plotTop) }
	line := func(name, color string, value func(RatePoint) (float64, bool)) series {
		s := series{Name: name, Color: color}
		var xy []string
		for _, p := range points {
			v, ok := value(p)
			if !ok {
				continue
			}
			px, py := fmtCoord(x(p.At)), fmtCoord(y(v))
			xy = append(xy, px+","+py)
			s.Dots = append(s.Dots, dot{X: px, Y: py})
			s.Last = v
		}
		s.Points = strings.Join(xy, " ")
		return s
	}
	for i, t := range types {
		c.Series = append(c.Series, line(t.AggregateType, palette[i%len(palette)], func(p RatePoint) (float64, bool) {
			v, ok := p.PerMinute[t.AggregateType]
			return v, ok
		}))
	}
	// The total last, drawn over the others.
	c.Series = append(c.Series, line("total", "#222222", func(p RatePoint) (float64, bool) { return p.Total, true }))
	for _, f := range []float64{0, 0.5, 1} {
		c.YTicks = append(c.YTicks, tick{Pos: fmtCoord(y(f * top)), Label: strconv.FormatFloat(f*top, 'f', -1, 64)})
	}
	for _, f := range []float64{0, 0.5, 1} {
		label := "now"
		if f < 1 {
			label = "−" + (time.Duration((1 - f) * float64(history))).Round(time.Second).String()
		}
		c.XTicks = append(c.XTicks, tick{Pos: fmtCoord(plotLeft + f*(plotRight-plotLeft)), Label: label})
	}
	return c
}

// niceCeil is the smallest 1, 2 or 5 times a power of ten at or above v
// (1 for v of 0).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func fmtCoord(v float64) string { return fmt.Sprintf("%.1f", v) }
