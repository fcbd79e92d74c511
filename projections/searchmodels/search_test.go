package searchmodels_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"

	"github.com/eventpipe/eventpipe/domains/todo"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/projections/searchmodels"
)

// TestSearchTodosMatchesWordsAndLeavesDeletedOut searches the todos by
// words of title and message, and reads one in real time.
func TestSearchTodosMatchesWordsAndLeavesDeletedOut(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	ref := func(id string) eventstore.Ref { return eventstore.Ref{Type: todo.AggregateType, ID: id} }
	var all []eventstore.Envelope
	all = append(all, w.append(ref("a"), 0, todo.TodoCreatedEvent.New(todo.TodoCreatedData{TodoData: todo.TodoData{Title: "Buy milk", Message: "from the farm shop"}, Owner: "alice"}))...)
	all = append(all, w.append(ref("b"), 0, todo.TodoCreatedEvent.New(todo.TodoCreatedData{TodoData: todo.TodoData{Title: "File taxes", Message: "the milk receipts too"}, Owner: "bob"}))...)
	all = append(all, w.append(ref("c"), 0, eventstore.Event(todo.TodoCreated, todo.TodoData{Title: "Milk the cows"}), eventstore.Event(todo.TodoDeleted, struct{}{}))...)
	all = append(all, w.append(ref("d"), 0, todo.TodoCreatedEvent.New(todo.TodoCreatedData{TodoData: todo.TodoData{Title: "Walk the dog"}, Owner: "alice"}),
		eventstore.Event(todo.TodoUpdated, todo.TodoData{Title: "Walk the dog", Message: "and buy milk", Completed: true}))...)
	a := w.applier(searchmodels.TodoSearch{})
	if _, err := a.Apply(ctx, all); err != nil {
		t.Fatal(err)
	}
	alias := w.alias(searchmodels.TodoSearch{})
	w.documents(alias) // refresh
	searchOf := func(q, owner string) []string {
		t.Helper()
		res, err := searchmodels.TodoIndex{Client: w.es, Alias: alias}.Search(ctx, searchmodels.TodoQuery{Q: q, Owner: owner, Page: searchmodels.Page{Size: 10}})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range res.Todos {
			got = append(got, d.ID)
		}
		if int(res.Total) != len(got) {
			t.Errorf("search %q: total %d, hits %d", q, res.Total, len(got))
		}
		return got
	}
	search := func(q string) []string { t.Helper(); return searchOf(q, "") }
	if got := strings.Join(searchOf("milk", "alice"), " "); got != "a d" {
		t.Errorf("alice's search for milk = %q, want her a and d", got)
	}
	if got := strings.Join(searchOf("milk", "carol"), " "); got != "" {
		t.Errorf("carol's search for milk = %q, want nothing", got)
	}
	for q, want := range map[string]string{
		"milk":      "a b d", // title first (boosted), c is deleted
		"MILK shop": "a",
		"dog milk":  "d",
		"piano":     "",
	} {
		got := strings.Join(search(q), " ")
		if q == "milk" {
			// a's match is in the boosted title; b and d in the message.
			if !strings.HasPrefix(got, "a ") || len(strings.Fields(got)) != 3 || strings.Contains(got, "c") {
				t.Errorf("search %q = %q, want a first, then b and d", q, got)
			}
			continue
		}
		if got != want {
			t.Errorf("search %q = %q, want %q", q, got, want)
		}
	}
	d, ok, err := searchmodels.TodoIndex{Client: w.es, Alias: alias}.Get(ctx, "d")
	if err != nil || !ok || d.Sequence != 2 || !d.Completed || d.Message != "and buy milk" || d.Owner != "alice" {
		t.Errorf("GetTodo(d) = %+v, %v, %v", d, ok, err)
	}
	for _, id := range []string{"c", "nope"} {
		if _, ok, err := (searchmodels.TodoIndex{Client: w.es, Alias: alias}).Get(ctx, id); ok || err != nil {
			t.Errorf("GetTodo(%s) found %v, err %v; want not found", id, ok, err)
		}
	}
}

// TestSearchOrdersFiltersAndCounts places 120 orders at random steps and
// checks the status filter, the range on the total and the aggregations
// against counts computed here.
func TestSearchOrdersFiltersAndCounts(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	status := map[string]string{}
	total := map[string]int64{}
	var all []eventstore.Envelope
	names := []string{"placed", "paid", "shipped", "delivered", "refunded"}
	for i := range 120 {
		id := fmt.Sprintf("o%03d", i)
		step := 1 + rng.IntN(5)
		total[id] = int64(100 * (1 + rng.IntN(50)))
		status[id] = names[step-1]
		all = append(all, w.orderHistory(id, fmt.Sprintf("c%d", i%7), total[id], step)...)
	}
	a := w.applier(searchmodels.OrderSearch{})
	if _, err := a.Apply(ctx, all); err != nil {
		t.Fatal(err)
	}
	alias := w.alias(searchmodels.OrderSearch{})
	w.documents(alias)
	res, err := searchmodels.OrderIndex{Client: w.es, Alias: alias}.Search(ctx, searchmodels.OrderQuery{Page: searchmodels.Page{Size: 100}})
	if err != nil {
		t.Fatal(err)
	}
	byStatus := map[string]int64{}
	for _, s := range status {
		byStatus[s]++
	}
	if res.Total != 120 || len(res.Orders) != 100 || fmt.Sprint(res.ByStatus) != fmt.Sprint(byStatus) {
		t.Errorf("all orders: total %d, page %d, by status %v; want 120, 100, %v", res.Total, len(res.Orders), res.ByStatus, byStatus)
	}
	if len(res.PerDay) != 1 || res.PerDay[0].Count != 120 {
		t.Errorf("per day = %+v, want one day with 120", res.PerDay)
	}
	min := int64(2500)
	res, err = searchmodels.OrderIndex{Client: w.es, Alias: alias}.Search(ctx, searchmodels.OrderQuery{Status: "shipped", MinTotal: &min, Page: searchmodels.Page{Size: 100}})
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for id, s := range status {
		if s == "shipped" && total[id] >= min {
			want++
		}
	}
	if int(res.Total) != want || len(res.Orders) != want || res.ByStatus["shipped"] != int64(want) || len(res.ByStatus) > 1 {
		t.Errorf("shipped, total ≥ %d: total %d, hits %d, by status %v; want %d", min, res.Total, len(res.Orders), res.ByStatus, want)
	}
	for _, o := range res.Orders {
		if o.Status != "shipped" || o.Total < min || o.TrackingNumber != "T-"+o.ID {
			t.Errorf("order %+v does not match the filter", o)
		}
	}
}

// TestBadSearchParametersAreTypedErrors checks that what a client can get
// wrong is a *QueryError naming the parameter, before any request.
func TestBadSearchParametersAreTypedErrors(t *testing.T) {
	for _, c := range []struct {
		orders bool
		query  string
		param  string
	}{
		{false, "", "q"},
		{false, "q=%20", "q"},
		{false, "q=milk&size=-1", "size"},
		{false, "q=milk&size=1000", "size"},
		{false, "q=milk&from=-5", "from"},
		{false, "q=milk&size=ten", "size"},
		{false, "q=milk&q=bread", "q"},
		{false, "q=milk&sort=title", "sort"},
		{false, "q=" + strings.Repeat("x", 300), "q"},
		{true, "status=lost", "status"},
		{true, "min_total=abc", "min_total"},
		{true, "min_total=-1", "min_total"},
		{true, "min_total=500&max_total=100", "max_total"},
		{true, "from=9995&size=10", "from"},
		{true, "color=red", "color"},
	} {
		v, err := url.ParseQuery(c.query)
		if err != nil {
			t.Fatal(err)
		}
		if c.orders {
			_, err = searchmodels.ParseOrderQuery(v)
		} else {
			_, err = searchmodels.ParseTodoQuery(v)
		}
		var qe *searchmodels.QueryError
		if !errors.As(err, &qe) || qe.Param != c.param {
			t.Errorf("%q: error %v, want a *QueryError on %q", c.query, err, c.param)
		}
	}
	if _, err := searchmodels.ParseOrderQuery(url.Values{"status": {"paid"}, "min_total": {"100"}, "size": {"5"}}); err != nil {
		t.Errorf("a good order query: %v", err)
	}
}
