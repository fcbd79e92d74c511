package esserver

import "net/http"

// handleAddBlock serves PUT /{index}/_block/{block}, Elasticsearch's add
// index block API. Only the write block is enforced by this server; it is
// the dynamic setting index.blocks.write, so it is logged and persists
// like any other setting, and PUT /{index}/_settings can lift it again.
func (s *Server) handleAddBlock(rc *reqCtx, p []string) (int, any) {
	expr, block := p[0], p[1]
	switch block {
	case "write":
	case "read_only", "read_only_allow_delete", "read", "metadata":
		return errResp(illegalArgument("[eventpipe] index block [%s] is not supported by this server (only write is)", block))
	default:
		return errResp(illegalArgument("No block found with name %s", block))
	}
	// a destructive operation: wildcards and _all need
	// action.destructive_requires_name false
	s.mu.RLock()
	derr := s.failDestructiveLocked(expr)
	s.mu.RUnlock()
	if derr != nil {
		return errResp(derr)
	}
	indices, err := s.resolveSearch(expr, rc.q)
	if err != nil {
		return errResp(err)
	}
	if err := s.putSettings(indices, map[string]string{"index.blocks." + block: "true"}); err != nil {
		return errResp(err)
	}
	out := make([]any, 0, len(indices))
	for _, ix := range indices {
		out = append(out, map[string]any{"name": ix.name, "blocked": true})
	}
	return http.StatusOK, map[string]any{"acknowledged": true, "shards_acknowledged": true, "indices": out}
}
