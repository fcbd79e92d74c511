package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/eventpipe/eventpipe/projections/searchmodels"
)

// searchChapter waits until the search models (Elasticsearch) hold what
// the commands imply and shows the searches the HTTP API answers from
// them: a todo read from the search model, full-text search, and the
// orders by status.
func (s *scenario) searchChapter(ctx context.Context, n *narrator) error {
	n.chapter("The search models (Elasticsearch: todos-search, orders-search)")
	coffee, milk := s.id("coffee"), s.id("milk")
	orders := url.Values{"customer": {s.customer}}
	deadline := time.Now().Add(s.cfg.Timeout)
	for {
		mismatch, err := s.compareSearch(ctx, coffee, milk, orders)
		if err != nil {
			return err
		}
		if mismatch == "" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: after %s the search models still differ from the commands: %s", s.cfg.Timeout, mismatch)
		}
		time.Sleep(300 * time.Millisecond)
	}
	var one struct {
		Title, Message string
	}
	etag, err := s.getJSON(ctx, "/todo/"+coffee+"?read=search", http.StatusOK, &one)
	if err != nil {
		return err
	}
	n.line("GET /todo/%s?read=search → 200, ETag %s: %q %q (from the index, the document's sequence as ETag)", coffee, etag, one.Title, one.Message)
	var found searchmodels.TodoResult
	if _, err := s.getJSON(ctx, "/todo/search?q=make+coffees&size=100", http.StatusOK, &found); err != nil {
		return err
	}
	n.line("GET /todo/search?q=make+coffees → %d found, %s among them", found.Total, coffee)
	var milkHits searchmodels.TodoResult
	if _, err := s.getJSON(ctx, "/todo/search?q=milk&size=100", http.StatusOK, &milkHits); err != nil {
		return err
	}
	n.line("GET /todo/search?q=milk → %d found; %s was deleted, so it is not among them", milkHits.Total, milk)
	var byStatus, big searchmodels.OrderResult
	if _, err := s.getJSON(ctx, "/orders/search?"+orders.Encode(), http.StatusOK, &byStatus); err != nil {
		return err
	}
	n.line("GET /orders/search?%s → %d orders; by status %v; per day %v", orders.Encode(), byStatus.Total, byStatus.ByStatus, byStatus.PerDay)
	if _, err := s.getJSON(ctx, "/orders/search?"+orders.Encode()+"&min_total=1000", http.StatusOK, &big); err != nil {
		return err
	}
	var ids []string
	for _, o := range big.Orders {
		ids = append(ids, fmt.Sprintf("%s (%s, %d)", o.ID, o.Status, o.Total))
	}
	n.line("GET /orders/search?%s&min_total=1000 → %s", orders.Encode(), strings.Join(ids, ", "))
	return nil
}

// compareSearch returns "" when the search models hold what the commands
// imply, or the first difference.
func (s *scenario) compareSearch(ctx context.Context, coffee, milk string, orders url.Values) (string, error) {
	var one struct{ Message string }
	etag, err := s.getJSON(ctx, "/todo/"+coffee+"?read=search", http.StatusOK, &one)
	if err != nil || etag != `"2"` || one.Message != s.todos[coffee].Message {
		return fmt.Sprintf("todo %s in the search model: ETag %s %q (%v)", coffee, etag, one.Message, err), nil
	}
	if _, err := s.getJSON(ctx, "/todo/"+milk+"?read=search", http.StatusNotFound, nil); err != nil {
		return fmt.Sprintf("deleted todo %s: %v", milk, err), nil
	}
	want := map[string]int64{}
	for _, o := range s.orders {
		want[string(o.Status)]++
	}
	var res searchmodels.OrderResult
	if _, err := s.getJSON(ctx, "/orders/search?"+orders.Encode(), http.StatusOK, &res); err != nil {
		return err.Error(), nil
	}
	if !maps.Equal(res.ByStatus, want) {
		return fmt.Sprintf("orders by status %v, want %v", res.ByStatus, want), nil
	}
	for _, q := range []struct {
		query, id string
		in        bool
	}{{"make+coffees", coffee, true}, {"milk", milk, false}} {
		var found searchmodels.TodoResult
		if _, err := s.getJSON(ctx, "/todo/search?size=100&q="+q.query, http.StatusOK, &found); err != nil {
			return err.Error(), nil
		}
		in := false
		for _, d := range found.Todos {
			in = in || d.ID == q.id
		}
		if in != q.in {
			return fmt.Sprintf("search %q finds %s: %v", q.query, q.id, in), nil
		}
	}
	return "", nil
}

// getJSON GETs path from the HTTP API, checks the status, decodes the
// body into v (when not nil) and returns the ETag.
func (s *scenario) getJSON(ctx context.Context, path string, want int, v any) (string, error) {
	return s.callJSON(ctx, http.MethodGet, path, nil, want, v)
}

// callJSON sends body (when not nil) as JSON to path of the HTTP API,
// checks the answer's status, decodes its body into v (when not nil)
// and returns its ETag.
func (s *scenario) callJSON(ctx context.Context, method, path string, body any, want int, v any) (string, error) {
	var reqBody io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return "", fmt.Errorf("%s %s: %w", method, path, err)
		}
		reqBody = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+s.cfg.Endpoints.HTTPAddr+path, reqBody)
	if err != nil {
		return "", err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return "", fmt.Errorf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, strings.TrimSpace(string(answer)))
	}
	if v != nil {
		if err := json.Unmarshal(answer, v); err != nil {
			return "", fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return resp.Header.Get("ETag"), nil
}
