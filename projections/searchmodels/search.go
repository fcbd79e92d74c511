package searchmodels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/eventpipe/eventpipe/projections/elastic/esclient"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/eventpipe/eventpipe/domains/order"
)

// QueryError is a search request that cannot be run: Param names the
// parameter at fault. HTTP answers it with 400.
type QueryError struct {
	Param  string
	Reason string
}

func (e *QueryError) Error() string { return fmt.Sprintf("search parameter %q: %s", e.Param, e.Reason) }

// Limits of a search request.
const (
	MaxSize     = 100   // hits per page
	MaxFrom     = 10000 // from + size, Elasticsearch's default max_result_window
	MaxQueryLen = 256   // characters of a full-text query
)

// Page is the from / size of a search.
type Page struct {
	From int `json:"from"`
	Size int `json:"size"`
}

func (p Page) validate() error {
	switch {
	case p.Size < 1 || p.Size > MaxSize:
		return &QueryError{Param: "size", Reason: fmt.Sprintf("%d is outside 1–%d", p.Size, MaxSize)}
	case p.From < 0:
		return &QueryError{Param: "from", Reason: fmt.Sprintf("%d is negative", p.From)}
	case p.From+p.Size > MaxFrom:
		return &QueryError{Param: "from", Reason: fmt.Sprintf("from + size is %d, past %d", p.From+p.Size, MaxFrom)}
	}
	return nil
}

// params reads url query parameters strictly: each known one at most
// once, an unknown one an error.
type params struct {
	v   url.Values
	err error
}

func newParams(v url.Values, known ...string) *params {
	p := &params{v: v}
	for k, vs := range v {
		switch {
		case !slices.Contains(known, k):
			sort.Strings(known)
			p.fail(&QueryError{Param: k, Reason: "unknown parameter (known: " + strings.Join(known, ", ") + ")"})
		case len(vs) > 1:
			p.fail(&QueryError{Param: k, Reason: "given more than once"})
		}
	}
	return p
}

func (p *params) fail(err error) {
	if p.err == nil {
		p.err = err
	}
}

func (p *params) str(k string) string { return p.v.Get(k) }

func (p *params) int(k string, def int64) int64 {
	s := p.v.Get(k)
	if !p.v.Has(k) {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		p.fail(&QueryError{Param: k, Reason: fmt.Sprintf("%q is not an integer", s)})
	}
	return n
}

func (p *params) optInt(k string) *int64 {
	if !p.v.Has(k) {
		return nil
	}
	n := p.int(k, 0)
	return &n
}

func (p *params) page() Page {
	return Page{From: int(p.int("from", 0)), Size: int(p.int("size", 10))}
}

// TodoQuery is a full-text search of the todos: q matches title and
// message (every word, any order, analysed as Elasticsearch's standard
// analyser does).
type TodoQuery struct {
	Q string `json:"q"`
	// Owner, when set, finds only the todos this subject owns (the API
	// sets it for a caller whose policy grants only its own todos; it is
	// not a URL parameter).
	Owner string `json:"owner,omitempty"`
	Page
}

// ParseTodoQuery reads a TodoQuery from URL parameters q, from and size
// (default 10), and validates it.
func ParseTodoQuery(v url.Values) (TodoQuery, error) {
	p := newParams(v, "q", "from", "size")
	q := TodoQuery{Q: p.str("q"), Page: p.page()}
	if p.err != nil {
		return TodoQuery{}, p.err
	}
	return q, q.Validate()
}

// Validate reports the first invalid field as a *QueryError.
func (q TodoQuery) Validate() error {
	switch {
	case strings.TrimSpace(q.Q) == "":
		return &QueryError{Param: "q", Reason: "empty; give the words to search for"}
	case !utf8.ValidString(q.Q) || utf8.RuneCountInString(q.Q) > MaxQueryLen:
		return &QueryError{Param: "q", Reason: fmt.Sprintf("not valid UTF-8 or longer than %d characters", MaxQueryLen)}
	}
	return q.Page.validate()
}

// TodoResult is a page of todos found, best match first.
type TodoResult struct {
	Total int64     `json:"total"`
	Todos []TodoDoc `json:"todos"`
}

// TodoIndex reads the todos-search read model through its alias.
type TodoIndex struct {
	Client esapi.Transport
	Alias  string
}

// Search runs q: the live todos matching every word, best match first.
func (x TodoIndex) Search(ctx context.Context, q TodoQuery) (TodoResult, error) {
	if err := q.Validate(); err != nil {
		return TodoResult{}, err
	}
	match := map[string]any{
		"must":     map[string]any{"multi_match": map[string]any{"query": q.Q, "fields": []string{"title^2", "message"}, "type": "cross_fields", "operator": "and"}},
		"must_not": map[string]any{"term": map[string]any{"deleted": true}},
	}
	if q.Owner != "" {
		match["filter"] = map[string]any{"term": map[string]any{"owner": q.Owner}}
	}
	body := map[string]any{
		"from": q.From, "size": q.Size, "track_total_hits": true,
		"query": map[string]any{"bool": match},
		"sort":  []any{"_score", map[string]any{"id": "asc"}},
	}
	var res searchAnswer[TodoDoc]
	if err := search(ctx, x.Client, x.Alias, body, &res); err != nil {
		return TodoResult{}, fmt.Errorf("search todos: %w", err)
	}
	out := TodoResult{Total: res.Hits.Total.Value, Todos: []TodoDoc{}}
	for _, h := range res.Hits.Hits {
		out.Todos = append(out.Todos, h.Source)
	}
	return out, nil
}

// Get reads one todo in real time (a write is seen as soon as it was
// acknowledged); a deleted or unknown todo is not found.
func (x TodoIndex) Get(ctx context.Context, id string) (TodoDoc, bool, error) {
	var res struct {
		Found  bool    `json:"found"`
		Source TodoDoc `json:"_source"`
	}
	err := esclient.Do(ctx, x.Client, esapi.GetRequest{Index: x.Alias, DocumentID: esclient.PathSegment(id)}, &res)
	var re *esclient.ResponseError
	if errors.As(err, &re) && re.Status == 404 && re.Type != "index_not_found_exception" {
		return TodoDoc{}, false, nil
	}
	if err != nil {
		return TodoDoc{}, false, fmt.Errorf("get todo %s: %w", id, err)
	}
	if !res.Found || res.Source.Deleted {
		return TodoDoc{}, false, nil
	}
	return res.Source, true, nil
}

// OrderQuery filters the orders: by status, customer and a range of the
// total (in cents), newest first.
type OrderQuery struct {
	Status   string `json:"status,omitempty"`
	Customer string `json:"customer,omitempty"`
	MinTotal *int64 `json:"min_total,omitempty"`
	MaxTotal *int64 `json:"max_total,omitempty"`
	Page
}

// ParseOrderQuery reads an OrderQuery from URL parameters status,
// customer, min_total, max_total, from and size (default 10), and
// validates it.
func ParseOrderQuery(v url.Values) (OrderQuery, error) {
	p := newParams(v, "status", "customer", "min_total", "max_total", "from", "size")
	q := OrderQuery{Status: p.str("status"), Customer: p.str("customer"), MinTotal: p.optInt("min_total"), MaxTotal: p.optInt("max_total"), Page: p.page()}
	if p.err != nil {
		return OrderQuery{}, p.err
	}
	return q, q.Validate()
}

// Statuses are the order statuses a query may filter by.
var Statuses = []order.Status{order.StatusPlaced, order.StatusPaid, order.StatusShipped, order.StatusDelivered, order.StatusRefunded}

// Validate reports the first invalid field as a *QueryError.
func (q OrderQuery) Validate() error {
	if q.Status != "" && !slices.Contains(Statuses, order.Status(q.Status)) {
		return &QueryError{Param: "status", Reason: fmt.Sprintf("%q is not an order status (placed, paid, shipped, delivered, refunded)", q.Status)}
	}
	if q.MinTotal != nil && *q.MinTotal < 0 {
		return &QueryError{Param: "min_total", Reason: fmt.Sprintf("%d is negative", *q.MinTotal)}
	}
	if q.MaxTotal != nil && q.MinTotal != nil && *q.MaxTotal < *q.MinTotal {
		return &QueryError{Param: "max_total", Reason: fmt.Sprintf("%d is below min_total %d", *q.MaxTotal, *q.MinTotal)}
	}
	return q.Page.validate()
}

// OrderResult is a page of orders, with the counts of every order the
// query matches by status and by day placed.
type OrderResult struct {
	Total    int64            `json:"total"`
	Orders   []OrderDoc       `json:"orders"`
	ByStatus map[string]int64 `json:"by_status"`
	PerDay   []DayCount       `json:"per_day"`
}

// DayCount is the orders placed on one day (UTC).
type DayCount struct {
	Day   string `json:"day"` // YYYY-MM-DD
	Count int64  `json:"count"`
}

// OrderIndex reads the orders-search read model through its alias.
type OrderIndex struct {
	Client esapi.Transport
	Alias  string
}

// Search runs q: a page of the matching orders, newest first, with the
// counts of all of them by status and by day.
func (x OrderIndex) Search(ctx context.Context, q OrderQuery) (OrderResult, error) {
	if err := q.Validate(); err != nil {
		return OrderResult{}, err
	}
	filter := []any{}
	if q.Status != "" {
		filter = append(filter, map[string]any{"term": map[string]any{"status": q.Status}})
	}
	if q.Customer != "" {
		filter = append(filter, map[string]any{"term": map[string]any{"customer": q.Customer}})
	}
	if q.MinTotal != nil || q.MaxTotal != nil {
		r := map[string]any{}
		if q.MinTotal != nil {
			r["gte"] = *q.MinTotal
		}
		if q.MaxTotal != nil {
			r["lte"] = *q.MaxTotal
		}
		filter = append(filter, map[string]any{"range": map[string]any{"total": r}})
	}
	body := map[string]any{
		"from": q.From, "size": q.Size, "track_total_hits": true,
		"query": map[string]any{"bool": map[string]any{"filter": filter}},
		"sort":  []any{map[string]any{"placed_at": "desc"}, map[string]any{"id": "asc"}},
		"aggs": map[string]any{
			"by_status": map[string]any{"terms": map[string]any{"field": "status", "size": len(Statuses)}},
			"per_day":   map[string]any{"date_histogram": map[string]any{"field": "placed_at", "calendar_interval": "day", "format": "yyyy-MM-dd"}},
		},
	}
	var res searchAnswer[OrderDoc]
	if err := search(ctx, x.Client, x.Alias, body, &res); err != nil {
		return OrderResult{}, fmt.Errorf("search orders: %w", err)
	}
	out := OrderResult{Total: res.Hits.Total.Value, Orders: []OrderDoc{}, ByStatus: map[string]int64{}, PerDay: []DayCount{}}
	for _, h := range res.Hits.Hits {
		out.Orders = append(out.Orders, h.Source)
	}
	for _, b := range res.Aggregations.ByStatus.Buckets {
		out.ByStatus[b.Key] = b.DocCount
	}
	for _, b := range res.Aggregations.PerDay.Buckets {
		if b.DocCount > 0 {
			out.PerDay = append(out.PerDay, DayCount{Day: b.KeyAsString, Count: b.DocCount})
		}
	}
	return out, nil
}

// searchAnswer is the part of a _search answer the searches read.
type searchAnswer[D any] struct {
	Hits struct {
		Total struct {
			Value int64 `json:"value"`
		} `json:"total"`
		Hits []struct {
			Source D `json:"_source"`
		} `json:"hits"`
	} `json:"hits"`
	Aggregations struct {
		ByStatus struct {
			Buckets []struct {
				Key      string `json:"key"`
				DocCount int64  `json:"doc_count"`
			} `json:"buckets"`
		} `json:"by_status"`
		PerDay struct {
			Buckets []struct {
				KeyAsString string `json:"key_as_string"`
				DocCount    int64  `json:"doc_count"`
			} `json:"buckets"`
		} `json:"per_day"`
	} `json:"aggregations"`
}

func search(ctx context.Context, es esapi.Transport, alias string, body map[string]any, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return esclient.Do(ctx, es, esapi.SearchRequest{Index: []string{alias}, Body: strings.NewReader(string(b))}, out)
}
