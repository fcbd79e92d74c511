package demo

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/analytics/aggregator"
	"github.com/eventpipe/eventpipe/analytics/analyticsapi"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/domains/order/orderapi"
	"github.com/eventpipe/eventpipe/projections/rollups"
	"github.com/eventpipe/eventpipe/rollup"
)

// visit is one session of the analytics chapter's browsing burst: its
// events, posted as one batch, posts times (2: a client retrying it).
type visit struct {
	session, user string // user "": an anonymous visitor
	events        []analytics.EventInput
	posts         int
}

// burst is the browsing burst of source s.id("demo")'s users, its
// times counted back from now (whole seconds): an earlier visit of ann's
// 90 minutes ago, so in an earlier hour, then three visits in the last
// four minutes, ben's batch posted twice.
func (s *scenario) burst(now time.Time) []visit {
	now = now.UTC().Truncate(time.Second)
	ev := func(ago time.Duration, typ, url string, props map[string]any) analytics.EventInput {
		at := now.Add(-ago)
		return analytics.EventInput{Type: typ, URL: url, Properties: props, CreatedAt: &at, UserAgent: "eventpipe-demo"}
	}
	view := func(ago time.Duration, url string) analytics.EventInput {
		return ev(ago, aggregator.PageViewType, url, nil)
	}
	click := func(ago time.Duration, url, button string) analytics.EventInput {
		return ev(ago, "click", url, map[string]any{"buttonId": button})
	}
	const m, sec = time.Minute, time.Second
	ann, ben := s.id("ann"), s.id("ben")
	return []visit{
		{session: "s1", user: ann, posts: 1, events: []analytics.EventInput{view(90*m, "/blog/event-sourcing")}},
		{session: "s2", user: ann, posts: 1, events: []analytics.EventInput{
			view(4*m, "/"), view(3*m+20*sec, "/pricing"), click(3*m+10*sec, "/pricing", "start-trial"), view(2*m+30*sec, "/signup")}},
		{session: "s3", user: ben, posts: 2, events: []analytics.EventInput{
			view(3*m, "/blog/event-sourcing"), click(2*m+40*sec, "/blog/event-sourcing", "read-docs"), view(m+40*sec, "/docs")}},
		{session: "s4", posts: 1, events: []analytics.EventInput{view(2*m, "/docs"), view(m, "/docs/relay")}},
	}
}

// sessionRow is what a session must show.
type sessionRow struct {
	User            string
	Events          int64
	Entry, Exit     string
	DurationSeconds int64
}

// hourRow is what an hourly aggregation must show.
type hourRow struct{ Events, PageViews, Sessions, Users int64 }

// implied folds the burst as the aggregation consumer must: every
// posted event counts (a batch posted twice is stored twice, with new
// ids); a session starts in the hour of its earliest event; its entry
// and exit are the URLs of its earliest and latest events.
func implied(visits []visit) (map[string]sessionRow, map[string]hourRow) {
	sessions, hours := map[string]sessionRow{}, map[string]hourRow{}
	users := map[string]map[string]bool{}
	for _, v := range visits {
		first, last := v.events[0], v.events[0]
		for _, e := range v.events {
			if e.CreatedAt.Before(*first.CreatedAt) {
				first = e
			}
			if e.CreatedAt.After(*last.CreatedAt) {
				last = e
			}
			h := analytics.HourBucket(*e.CreatedAt)
			row := hours[h]
			row.Events += int64(v.posts)
			if e.Type == aggregator.PageViewType {
				row.PageViews += int64(v.posts)
			}
			if v.user != "" {
				if users[h] == nil {
					users[h] = map[string]bool{}
				}
				users[h][v.user] = true
			}
			row.Users = int64(len(users[h]))
			hours[h] = row
		}
		h := analytics.HourBucket(*first.CreatedAt)
		row := hours[h]
		row.Sessions++
		hours[h] = row
		sessions[v.session] = sessionRow{User: v.user, Events: int64(len(v.events) * v.posts), Entry: first.URL, Exit: last.URL,
			DurationSeconds: int64(last.CreatedAt.Sub(*first.CreatedAt) / time.Second)}
	}
	return sessions, hours
}

// analyticsView is what the HTTP API answers about the burst and the
// order roll-up.
type analyticsView struct {
	sessions     []analytics.Session     // GET /sources/{id}/sessions
	hours        []analytics.Aggregation // GET /sources/{id}/aggregations?period=hourly&from=&to=
	userSessions []analytics.Session     // GET /users/{ann}/sessions, this source's
	rollup       map[string]rollup.Measures
}

// analyticsChapter posts the browsing burst to the analytics API, waits
// until the aggregation consumer's sessions and hourly aggregations, and
// the order roll-up, hold what the burst and the order commands imply,
// and prints them next to it.
func (s *scenario) analyticsChapter(ctx context.Context, n *narrator) error {
	source := s.id("demo")
	n.chapter("Analytics: a browsing burst, its sessions and hourly counts (source " + source + ")")
	visits := s.burst(time.Now())
	for _, v := range visits {
		who := "anonymous"
		if v.user != "" {
			who = "user " + v.user
		}
		steps := make([]string, len(v.events))
		for i, e := range v.events {
			steps[i] = fmt.Sprintf("%s %s %s", e.CreatedAt.Format(time.TimeOnly), e.Type, e.URL)
		}
		for post := 1; post <= v.posts; post++ {
			var out analyticsapi.Ingested
			path := "/sources/" + source + "/events"
			if _, err := s.callJSON(ctx, http.MethodPost, path, map[string]any{"events": withSession(v)}, http.StatusCreated, &out); err != nil {
				return fmt.Errorf("demo: %w", err)
			}
			if post == 1 {
				n.line("POST %s  session %s, %s: %s → 201 Created", path, v.session, who, count(len(out.Events), "event"))
				n.line("     %s", strings.Join(steps, "  ·  "))
				continue
			}
			n.line("POST %s  session %s again, the same batch (a client retrying) → 201 Created: %d more events, new ids", path, v.session, len(out.Events))
		}
	}
	posted := time.Now()
	topic := bus.Topics{Prefix: s.cfg.Endpoints.TopicPrefix}.Analytics(source)
	n.line("the raw events are stored write-sharded; the relay carries the analytics table's stream to %s,", topic)
	n.line("from which the aggregation consumer keeps the sessions and the hourly and daily aggregations")

	wantSessions, wantHours := implied(visits)
	from, to := *visits[0].events[0].CreatedAt, time.Now().UTC()
	hoursPath := fmt.Sprintf("/sources/%s/aggregations?period=%s&from=%s&to=%s", source, analytics.Hourly, from.Format(time.RFC3339), to.Format(time.RFC3339))
	deadline := time.Now().Add(s.cfg.Timeout)
	var view analyticsView
	for {
		var err error
		if view, err = s.fetchAnalytics(ctx, source, hoursPath); err != nil {
			return err
		}
		mismatch := s.analyticsMismatch(view, wantSessions, wantHours)
		if mismatch == "" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: after %s the analytics and roll-ups still differ from the burst and the orders: %s", s.cfg.Timeout, mismatch)
		}
		time.Sleep(300 * time.Millisecond)
	}
	n.line("%.1f s after the last POST the sessions and aggregations count every event:", time.Since(posted).Seconds())

	n.line("sessions (GET /sources/%s/sessions):", source)
	for _, got := range slices.Backward(view.sessions) {
		want := wantSessions[got.SessionID]
		n.line("  %-3s %-12s %-9s  %-21s → %-21s %3d s   (expected %s, %s → %s, %d s)",
			got.SessionID, userOrAnonymous(got.UserID), count(int(got.EventCount), "event"), got.EntryURL, got.ExitURL, got.DurationSeconds,
			count(int(want.Events), "event"), want.Entry, want.Exit, want.DurationSeconds)
	}
	n.line("hourly aggregations (GET %s):", hoursPath)
	for _, got := range view.hours {
		want := wantHours[got.Bucket]
		n.line("  %s  events %2d  page views %2d  sessions %d  unique users %d   (expected %d, %d, %d, %d)",
			got.Bucket, got.Events, got.PageViews, got.Sessions, got.UniqueUsers, want.Events, want.PageViews, want.Sessions, want.Users)
	}
	ids := make([]string, len(view.userSessions))
	for i, us := range view.userSessions {
		ids[i] = fmt.Sprintf("%s (%s)", us.SessionID, count(int(us.EventCount), "event"))
	}
	n.line("GET /users/%s/sessions → %s: her visits, from the by-user index; s1 was 90 minutes ago, in an earlier hour", s.id("ann"), strings.Join(ids, ", "))
	n.line("ben's %d events are his 3 posted twice without eventIds or an Idempotency-Key: such a retried POST is stored", wantSessions["s3"].Events)
	n.line("again (each copy gets an id of its own); with client eventIds or an Idempotency-Key a retry stores nothing twice")

	n.line("order roll-up (Postgres, GET /orders/rollups?period=hourly): every order of the hour, not only this run's:")
	added := rollup.Measures{}
	for _, b := range sortedKeys(view.rollup) {
		m, base := view.rollup[b], s.rollupBase[b]
		n.line("  %s  orders %d  revenue %d  refunds %d   (before this run's orders: %d, %d, %d)", b,
			m[rollups.MeasureOrders], m[rollups.MeasureRevenue], m[rollups.MeasureRefunds],
			base[rollups.MeasureOrders], base[rollups.MeasureRevenue], base[rollups.MeasureRefunds])
		for k, v := range m {
			added[k] += v - base[k]
		}
	}
	w := s.rollupWant
	n.line("this run's orders added %s, %d in revenue, %s   (expected %d, %d, %d)",
		count(int(added[rollups.MeasureOrders]), "order"), added[rollups.MeasureRevenue], count(int(added[rollups.MeasureRefunds]), "refund"),
		w[rollups.MeasureOrders], w[rollups.MeasureRevenue], w[rollups.MeasureRefunds])
	return nil
}

// withSession returns v's events with its session and user.
func withSession(v visit) []analytics.EventInput {
	out := slices.Clone(v.events)
	for i := range out {
		out[i].SessionID, out[i].UserID = v.session, v.user
	}
	return out
}

// fetchAnalytics reads the burst's sessions and hourly aggregations, the
// sessions of its user ann, and the order roll-up since the orders
// chapter began.
func (s *scenario) fetchAnalytics(ctx context.Context, source, hoursPath string) (analyticsView, error) {
	var v analyticsView
	var sessions analyticsapi.Sessions
	if _, err := s.getJSON(ctx, "/sources/"+source+"/sessions?limit=100", http.StatusOK, &sessions); err != nil {
		return v, fmt.Errorf("demo: %w", err)
	}
	var hours analyticsapi.Aggregations
	if _, err := s.getJSON(ctx, hoursPath, http.StatusOK, &hours); err != nil {
		return v, fmt.Errorf("demo: %w", err)
	}
	var mine analyticsapi.Sessions
	if _, err := s.getJSON(ctx, "/users/"+s.id("ann")+"/sessions?limit=100", http.StatusOK, &mine); err != nil {
		return v, fmt.Errorf("demo: %w", err)
	}
	for _, us := range mine.Sessions {
		if us.SourceID == source {
			v.userSessions = append(v.userSessions, us)
		}
	}
	v.sessions, v.hours = sessions.Sessions, hours.Aggregations
	var err error
	v.rollup, err = s.orderRollup(ctx, s.rollupFrom, time.Now())
	return v, err
}

// analyticsMismatch returns "" when v holds what the burst and the
// order commands imply, or the first difference.
func (s *scenario) analyticsMismatch(v analyticsView, sessions map[string]sessionRow, hours map[string]hourRow) string {
	if len(v.sessions) != len(sessions) {
		return fmt.Sprintf("%d sessions, want %d", len(v.sessions), len(sessions))
	}
	for _, got := range v.sessions {
		g := sessionRow{User: got.UserID, Events: got.EventCount, Entry: got.EntryURL, Exit: got.ExitURL, DurationSeconds: got.DurationSeconds}
		if want, ok := sessions[got.SessionID]; !ok || g != want {
			return fmt.Sprintf("session %s %+v, want %+v", got.SessionID, g, want)
		}
	}
	if len(v.hours) != len(hours) {
		return fmt.Sprintf("%d hourly aggregations, want %d", len(v.hours), len(hours))
	}
	for _, got := range v.hours {
		g := hourRow{Events: got.Events, PageViews: got.PageViews, Sessions: got.Sessions, Users: got.UniqueUsers}
		if want := hours[got.Bucket]; g != want {
			return fmt.Sprintf("hour %s %+v, want %+v", got.Bucket, g, want)
		}
	}
	var annSessions int
	for _, row := range sessions {
		if row.User == s.id("ann") {
			annSessions++
		}
	}
	if len(v.userSessions) != annSessions {
		return fmt.Sprintf("%d sessions of %s by user, want %d", len(v.userSessions), s.id("ann"), annSessions)
	}
	added := rollup.Measures{}
	for b, m := range v.rollup {
		for k, val := range m {
			added[k] += val - s.rollupBase[b][k]
		}
	}
	for _, k := range []string{rollups.MeasureOrders, rollups.MeasurePlacedTotal, rollups.MeasurePayments,
		rollups.MeasureRevenue, rollups.MeasureRefunds, rollups.MeasureRefunded} {
		if added[k] != s.rollupWant[k] {
			return fmt.Sprintf("order roll-up: this run added %d %s, want %d", added[k], k, s.rollupWant[k])
		}
	}
	return ""
}

// orderRollup reads the hourly order roll-up from the hour holding from
// to the one holding to, by bucket.
func (s *scenario) orderRollup(ctx context.Context, from, to time.Time) (map[string]rollup.Measures, error) {
	q := url.Values{"period": {string(rollup.Hourly)}, "from": {from.UTC().Format(time.RFC3339)}, "to": {to.UTC().Format(time.RFC3339)}}
	var res orderapi.RollupsResult
	if _, err := s.getJSON(ctx, "/orders/rollups?"+q.Encode(), http.StatusOK, &res); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	out := map[string]rollup.Measures{}
	for _, b := range res.Buckets {
		out[b.Bucket] = rollup.Measures{rollups.MeasureOrders: b.Orders, rollups.MeasurePlacedTotal: b.PlacedTotal,
			rollups.MeasurePayments: b.Payments, rollups.MeasureRevenue: b.Revenue,
			rollups.MeasureRefunds: b.Refunds, rollups.MeasureRefunded: b.Refunded}
	}
	return out, nil
}

// count is "1 event", "2 events".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// userOrAnonymous names a session's user, or says it had none.
func userOrAnonymous(s string) string {
	if s == "" {
		return "anonymous"
	}
	return s
}
