package analytics_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eventpipe/eventpipe/analytics"
	"github.com/eventpipe/eventpipe/eventstore"
)

// TestKeysAndBucketsFollowTheDocumentedLayout checks the key helpers the
// aggregation consumer builds items with.
func TestKeysAndBucketsFollowTheDocumentedLayout(t *testing.T) {
	at := time.Date(2026, 5, 13, 1, 59, 59, 999, time.FixedZone("CEST", 2*3600)) // 2026-05-12 23:59:59 UTC
	checks := []struct{ got, want string }{
		{analytics.HourBucket(at), "2026-05-12T23:00:00Z"},
		{analytics.DayBucket(at), "2026-05-12"},
		{analytics.Hourly.Bucket(at), "2026-05-12T23:00:00Z"},
		{analytics.Period("weekly").Bucket(at), ""},
		{analytics.SourceKey("my-site"), "SOURCE#my-site"},
		{analytics.EventKey("my-site", 42, "01HW").PK, "SOURCE#my-site#SHARD#42"},
		{analytics.EventKey("my-site", 42, "01HW").SK, "EVENT#01HW"},
		{analytics.SessionKey("my-site", "01HW").PK, "SOURCE#my-site"},
		{analytics.SessionKey("my-site", "01HW").SK, "SESSION#01HW"},
		{analytics.UserKey("u_01"), "USER#u_01"},
		{analytics.AggregationKey("my-site", analytics.Hourly, "2026-05-12T14:00:00Z").SK, "AGG#hourly#2026-05-12T14:00:00Z"},
		{analytics.AggregationKey("my-site", analytics.Daily, "2026-05-12").SK, "AGG#daily#2026-05-12"},
	}
	for i, c := range checks {
		if c.got != c.want {
			t.Errorf("check %d: %q, want %q", i, c.got, c.want)
		}
	}
	if k := analytics.SessionKey("a", "b").Attributes(); len(k) != 2 || k["pk"] == nil || k["sk"] == nil {
		t.Errorf("Key.Attributes = %v, want pk and sk", k)
	}
}

// TestNewFillsDefaultsAndValidateNamesTheBadField checks the Config.
func TestNewFillsDefaultsAndValidateNamesTheBadField(t *testing.T) {
	w := &memoryWriter{}
	if _, err := analytics.New(analytics.Config{Client: w}); err != nil {
		t.Fatalf("New with defaults: %v", err)
	}
	cases := []struct {
		field string
		mod   func(*analytics.Config)
	}{
		{"Client", func(c *analytics.Config) { c.Client = nil }},
		{"Table", func(c *analytics.Config) { c.Table = "ab" }},
		{"Shards", func(c *analytics.Config) { c.Shards = 1001 }},
		{"Shards", func(c *analytics.Config) { c.Shards = -1 }},
		{"EventTTL", func(c *analytics.Config) { c.EventTTL = -time.Hour }},
		{"MaxEventBytes", func(c *analytics.Config) { c.MaxEventBytes = 1 << 20 }},
		{"MaxBatch", func(c *analytics.Config) { c.MaxBatch = -1 }},
		{"MaxAge", func(c *analytics.Config) { c.MaxAge = 8 * 24 * time.Hour }},
		{"PageSize", func(c *analytics.Config) { c.PageSize = 1001 }},
		{"QueryConcurrency", func(c *analytics.Config) { c.QueryConcurrency = -2 }},
		{"WriteAttempts", func(c *analytics.Config) { c.WriteAttempts = -1 }},
		{"BackoffBase", func(c *analytics.Config) { c.BackoffBase, c.BackoffMax = time.Second, time.Millisecond }},
	}
	for _, c := range cases {
		cfg := analytics.Config{Client: w}
		c.mod(&cfg)
		_, err := analytics.New(cfg)
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field || !strings.Contains(err.Error(), "Config") {
			t.Errorf("New with a bad %s = %v, want an *eventstore.ValidationError naming it", c.field, err)
		}
	}
}
