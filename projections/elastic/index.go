package elastic

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/eventpipe/eventpipe/projections/elastic/esclient"

	"github.com/elastic/go-elasticsearch/v8/esapi"
)

// lower is strings.ToLower: index and alias names are lower case.
func lower(s string) string { return strings.ToLower(s) }

// AliasTarget returns the index alias points to, "" when the alias does
// not exist.
func AliasTarget(ctx context.Context, es esapi.Transport, alias string) (string, error) {
	var res map[string]any
	err := esclient.Do(ctx, es, esapi.IndicesGetAliasRequest{Name: []string{alias}}, &res)
	if esclient.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("elastic: resolve alias %s: %w", alias, err)
	}
	if len(res) != 1 {
		names := make([]string, 0, len(res))
		for n := range res {
			names = append(names, n)
		}
		return "", fmt.Errorf("elastic: alias %s points to %d indices (%s); eventpipe writes through an alias with one index", alias, len(res), strings.Join(names, ", "))
	}
	for name := range res {
		return name, nil
	}
	return "", nil
}

// EnsureIndex creates the read model's first index with its settings and
// mappings, behind alias, unless the alias exists. It is idempotent and
// safe to run from several processes at once.
func EnsureIndex(ctx context.Context, es esapi.Transport, p Projection, alias string) error {
	target, err := AliasTarget(ctx, es, alias)
	if err != nil || target != "" {
		return err
	}
	// A fixed name: processes that race here create the same index.
	err = createIndex(ctx, es, alias+"-0", p, alias)
	if err != nil && !isAlreadyExists(err) {
		return err
	}
	if target, err = AliasTarget(ctx, es, alias); err == nil && target == "" {
		err = fmt.Errorf("elastic: index %s-0 exists without alias %s (left by an earlier run?); delete it or point the alias at it", alias, alias)
	}
	return err
}

// createIndex creates index with p's settings and mappings, and alias
// when not empty.
func createIndex(ctx context.Context, es esapi.Transport, index string, p Projection, alias string) error {
	body := map[string]any{}
	for k, v := range p.IndexBody() {
		body[k] = v
	}
	if alias != "" {
		body["aliases"] = map[string]any{alias: map[string]any{}}
	}
	if err := esclient.Do(ctx, es, esapi.IndicesCreateRequest{Index: index, Body: esclient.JSONBody(body)}, nil); err != nil {
		return fmt.Errorf("elastic: create index %s: %w", index, err)
	}
	return nil
}

func isAlreadyExists(err error) bool {
	var re *esclient.ResponseError
	return errors.As(err, &re) && re.Type == "resource_already_exists_exception"
}

// newIndexName is the name of a replay's new index behind alias.
func newIndexName(alias string, now time.Time) string {
	return fmt.Sprintf("%s-%d", alias, now.UnixMilli())
}

// refresh makes every write to index so far visible to search.
func refresh(ctx context.Context, es esapi.Transport, index string) error {
	if err := esclient.Do(ctx, es, esapi.IndicesRefreshRequest{Index: []string{index}}, nil); err != nil {
		return fmt.Errorf("elastic: refresh %s: %w", index, err)
	}
	return nil
}

// deleteIndex deletes index; a missing one is no error.
func deleteIndex(ctx context.Context, es esapi.Transport, index string) error {
	if err := esclient.Do(ctx, es, esapi.IndicesDeleteRequest{Index: []string{index}}, nil); err != nil && !esclient.IsNotFound(err) {
		return fmt.Errorf("elastic: delete index %s: %w", index, err)
	}
	return nil
}
