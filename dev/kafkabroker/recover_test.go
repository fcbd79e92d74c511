package kafkabroker

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"testing"
)

func TestRecoverTopicsAddsTopicsThatOnlyHavePartitionFolders(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("meta.json", `{"version":1,"cluster_id":"x"}`)
	write("topics.json", `{"version":1,"topics":[{"name":"known","id":"AAAAAAAAAAAAAAAAAAAAAA==","partitions":1,"replicas":1,"configs":{"retention.ms":"1"}}]}`)
	for _, p := range []string{"known-0", "known-1", url.PathEscape("events.bank/account") + "-0", url.PathEscape("events.bank/account") + "-2", "not-a-partition"} {
		if err := os.MkdirAll(filepath.Join(dir, "partitions", p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got, err := recoverTopics(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "events.bank/account" || got[1] != "known" {
		t.Fatalf("recovered %v, want [events.bank/account known]", got)
	}
	var file struct {
		Topics []struct {
			Name       string            `json:"name"`
			ID         string            `json:"id"`
			Partitions int               `json:"partitions"`
			Configs    map[string]string `json:"configs"`
		} `json:"topics"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, "topics.json"))
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	parts := map[string]int{}
	for _, tp := range file.Topics {
		parts[tp.Name] = tp.Partitions
		if tp.Name == "known" && tp.Configs["retention.ms"] != "1" {
			t.Errorf("known topic lost its configs: %v", tp.Configs)
		}
		if tp.ID == "" {
			t.Errorf("topic %s has no id", tp.Name)
		}
	}
	if len(parts) != 2 || parts["known"] != 2 || parts["events.bank/account"] != 3 {
		t.Fatalf("partition counts %v", parts)
	}
	// A second pass finds nothing more to do.
	if again, err := recoverTopics(dir); err != nil || len(again) != 0 {
		t.Fatalf("second recovery = %v, %v; want nothing", again, err)
	}
}

func TestRecoverTopicsLeavesAFreshFolderAlone(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "partitions", "t-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := recoverTopics(dir); err != nil || got != nil {
		t.Fatalf("recoverTopics on a folder without meta.json = %v, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "topics.json")); !os.IsNotExist(err) {
		t.Fatalf("topics.json written for a fresh folder: %v", err)
	}
}
