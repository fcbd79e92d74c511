package relay

import "sort"

// Readable returns the ids of the shards whose records may be read now,
// in a stable order: shards that are not finished and whose parent is
// finished or no longer known (neither in the stream nor in the lease
// table: trimmed away after the stream's retention). A child is never
// read before its parent is read to its end, so one aggregate's records
// reach the bus in the order the stream holds them across a shard split.
func Readable(leases []Lease) []string {
	byID := make(map[string]Lease, len(leases))
	for _, l := range leases {
		byID[l.ShardID] = l
	}
	var out []string
	for _, l := range leases {
		if l.Finished {
			continue
		}
		if parent, ok := byID[l.ParentShardID]; ok && l.ParentShardID != "" && !parent.Finished {
			continue
		}
		out = append(out, l.ShardID)
	}
	sort.Strings(out)
	return out
}
