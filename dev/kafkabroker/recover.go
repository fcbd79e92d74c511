package kafkabroker

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// recoverTopics repairs the topic list after a crash.
//
// kfake appends records and offset commits to DataDir as they happen, but
// writes its topic list (topics.json) only at start-up and on a clean
// Close. A topic created while the broker ran (auto-created, or through
// CreateTopics) is therefore missing from the list after a kill -9 even
// though its partition folders hold every record; on restart kfake would
// not load them and auto-creation would make the topic again, empty.
//
// Before the cluster starts, recoverTopics adds every topic that has
// partition folders (partitions/<url-escaped topic>-<n>) but no entry in
// topics.json, and raises a partition count that is lower than the folders
// show. Topic configs set at runtime on such a topic are not recoverable
// and fall back to the broker defaults. The format handled is the one of
// the pinned kfake version (persist version 1).
func recoverTopics(dataDir string) ([]string, error) {
	if _, err := os.Stat(filepath.Join(dataDir, "meta.json")); errors.Is(err, os.ErrNotExist) {
		return nil, nil // a fresh folder: nothing to recover
	}
	onDisk, err := partitionFolders(dataDir)
	if err != nil || len(onDisk) == 0 {
		return nil, err
	}
	path := filepath.Join(dataDir, "topics.json")
	file := struct {
		Version int              `json:"version"`
		Topics  []map[string]any `json:"topics"`
	}{Version: 1}
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &file); err != nil {
			return nil, fmt.Errorf("parse %s: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if file.Version != 1 {
		return nil, fmt.Errorf("%s has persist version %d; this broker understands 1", path, file.Version)
	}
	known := map[string]map[string]any{}
	for _, t := range file.Topics {
		if name, ok := t["name"].(string); ok {
			known[name] = t
		}
	}
	var recovered []string
	for topic, parts := range onDisk {
		if t, ok := known[topic]; ok {
			if n, _ := t["partitions"].(float64); int(n) < parts {
				t["partitions"] = parts
				recovered = append(recovered, topic)
			}
			continue
		}
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return nil, err
		}
		file.Topics = append(file.Topics, map[string]any{
			"name":       topic,
			"id":         base64.StdEncoding.EncodeToString(id[:]),
			"partitions": parts,
			"replicas":   1,
		})
		recovered = append(recovered, topic)
	}
	if len(recovered) == 0 {
		return nil, nil
	}
	sort.Strings(recovered)
	b, err := json.Marshal(file)
	if err != nil {
		return nil, err
	}
	tmp := path + ".recover"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, err
	}
	return recovered, nil
}

// partitionFolders maps each topic with partition folders to its
// partition count (highest partition number + 1).
func partitionFolders(dataDir string) (map[string]int, error) {
	entries, err := os.ReadDir(filepath.Join(dataDir, "partitions"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		i := strings.LastIndexByte(e.Name(), '-')
		if i <= 0 {
			continue
		}
		part, err := strconv.Atoi(e.Name()[i+1:])
		if err != nil || part < 0 {
			continue
		}
		topic, err := url.PathUnescape(e.Name()[:i])
		if err != nil {
			continue
		}
		if part+1 > out[topic] {
			out[topic] = part + 1
		}
	}
	return out, nil
}
