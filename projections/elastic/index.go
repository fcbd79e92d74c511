package elastic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
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
	err = createIndex(ctx, es, alias+"-0", p, alias, "")
	if err != nil && !isAlreadyExists(err) {
		return err
	}
	if target, err = AliasTarget(ctx, es, alias); err == nil && target == "" {
		err = fmt.Errorf("elastic: index %s-0 exists without alias %s (left by an earlier run?); delete it or point the alias at it", alias, alias)
	}
	return err
}

// createIndex creates index with p's settings and mappings, and alias
// when not empty; replicas, when not empty, replaces the number of
// replicas p's settings give.
func createIndex(ctx context.Context, es esapi.Transport, index string, p Projection, alias, replicas string) error {
	body := map[string]any{}
	for k, v := range p.IndexBody() {
		body[k] = v
	}
	if replicas != "" {
		settings, err := withReplicas(body["settings"], replicas)
		if err != nil {
			return fmt.Errorf("elastic: create index %s: %w", index, err)
		}
		body["settings"] = settings
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

// withReplicas returns a copy of the index settings of a create-index
// body (nil, or an object in any of Elasticsearch's spellings: nested
// under "index" or not, dotted keys) with number_of_replicas set to n and
// every other spelling of it removed.
func withReplicas(settings any, n string) (map[string]any, error) {
	out := map[string]any{}
	if settings != nil {
		raw, err := json.Marshal(settings)
		if err != nil {
			return nil, fmt.Errorf("encode the projection's settings: %w", err)
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			return nil, fmt.Errorf("the projection's settings are not an object: %w", err)
		}
	}
	delete(out, "index.number_of_replicas")
	if nested, ok := out["index"].(map[string]any); ok {
		delete(nested, "number_of_replicas")
	}
	out["number_of_replicas"] = n
	return out, nil
}

// liveReplicas returns the index.number_of_replicas setting of index, as
// GET /<index>/_settings gives it.
func liveReplicas(ctx context.Context, es esapi.Transport, index string) (string, error) {
	var res map[string]struct {
		Settings struct {
			Index struct {
				Replicas json.RawMessage `json:"number_of_replicas"`
			} `json:"index"`
		} `json:"settings"`
	}
	if err := esclient.Do(ctx, es, esapi.IndicesGetSettingsRequest{Index: []string{index}}, &res); err != nil {
		return "", fmt.Errorf("elastic: settings of %s: %w", index, err)
	}
	raw := res[index].Settings.Index.Replicas
	var n string
	if err := json.Unmarshal(raw, &n); err != nil {
		var num json.Number
		if err := json.Unmarshal(raw, &num); err != nil || num == "" {
			return "", fmt.Errorf("elastic: settings of %s: no index.number_of_replicas in %s", index, raw)
		}
		n = num.String()
	}
	if _, err := strconv.ParseUint(n, 10, 32); err != nil {
		return "", fmt.Errorf("elastic: settings of %s: index.number_of_replicas %q is not a count", index, n)
	}
	return n, nil
}

// newIndexName is the name of a replay's new index behind alias:
// <alias>-<unix ms>, the suffix always 13 digits (from 2001 to 2286).
func newIndexName(alias string, now time.Time) string {
	return fmt.Sprintf("%s-%d", alias, now.UnixMilli())
}

// ownIndexSuffix matches what follows "<alias>-" in the name of an index
// of alias's own: 0 (EnsureIndex's first index) or a replay's unix ms
// (newIndexName). Another model's index, whose name only starts with
// the alias (todos-search-v2-0 beside todos-search), never matches.
var ownIndexSuffix = regexp.MustCompile(`^(0|[1-9][0-9]{12})$`)

// isOwnIndex reports whether index is named as an index of alias's own.
func isOwnIndex(alias, index string) bool {
	suffix, ok := strings.CutPrefix(index, alias+"-")
	return ok && ownIndexSuffix.MatchString(suffix)
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
