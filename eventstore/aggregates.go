package eventstore

import (
	"context"
	"fmt"
)

// AggregateLister lists the aggregates of one type in id order, a page at
// a time: what `eventpipe recalculate --all` works through. A reader
// holds one page, never the whole list; the id it stopped after resumes
// it. eventstore/dynamodb (from its by-type index) and eventstore/memstore
// implement it.
type AggregateLister interface {
	// ListAggregates returns the ids of q.Type's aggregates above q.After,
	// at most q.Limit of them, sorted. A bad field of q is a
	// *ValidationError naming it.
	ListAggregates(ctx context.Context, q AggregateQuery) (AggregatePage, error)
}

// AggregateQuery selects one page of an AggregateLister's listing.
type AggregateQuery struct {
	// Type is the aggregate type. Required.
	Type string
	// After starts the page after this id ("" at the first).
	After string
	// Limit is the page size; 0 means the store's default page size. At
	// most MaxPageSize.
	Limit int
}

// Validate reports a bad Type, After or Limit as a *ValidationError.
func (q AggregateQuery) Validate() error {
	if err := ValidateName("aggregate_type", q.Type); err != nil {
		return err
	}
	if q.After != "" {
		if err := ValidateName("after", q.After); err != nil {
			return err
		}
	}
	if q.Limit < 0 || q.Limit > MaxPageSize {
		return &ValidationError{Field: "limit", Reason: fmt.Sprintf("is %d, want 0–%d", q.Limit, MaxPageSize)}
	}
	return nil
}

// AggregatePage is one page of an aggregate listing.
type AggregatePage struct {
	// IDs are sorted, all above the query's After.
	IDs []string
	// More is set when there may be ids after the last one: query again
	// with After set to it. A page may be empty with More unset.
	More bool
}
