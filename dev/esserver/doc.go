// Package esserver is the eventpipe Elasticsearch-API server: a local
// stand-in that implements a subset of the Elasticsearch 8 REST API, for
// machines where Elasticsearch itself cannot be installed. It is not
// Elasticsearch. It says so in its logs and in the tagline of GET /, while
// answering with an 8.x version number and the X-Elastic-Product header so
// that the official clients (github.com/elastic/go-elasticsearch/v8) accept
// it.
//
// # TLS and authentication
//
// Both are off by default. Config.TLSCertFile and TLSKeyFile (flags
// --tls-cert-file, --tls-key-file) serve HTTPS; TLSCAFile (--tls-ca-file)
// appends the CA to the chain sent so that clients can pin the CA's
// fingerprint. Config.CredentialsFile (--credentials-file) names a JSON
// file of users and API keys (Credentials); then every request needs
// "Authorization: Basic base64(user:password)" or "Authorization: ApiKey
// base64(id:api_key)", and is otherwise answered 401 security_exception
// with the WWW-Authenticate challenges and messages of Elasticsearch 8.15.
//
// # Endpoints
//
// docs/elasticsearch-server.md tables, per API and parameter, what is
// implemented and what is refused (and with which reason).
//
//   - GET|HEAD /                       cluster info
//   - GET /_cluster/health             single-node health
//   - GET|PUT /_cluster/settings       cluster settings: action.destructive_requires_name
//     (persistent, transient, node setting Config.DestructiveRequiresName)
//   - GET /_security/_authenticate     who the request authenticated as
//   - PUT|GET|HEAD|DELETE /{index}     create (settings, mappings, aliases), get, exists, delete
//   - GET|PUT /{index}/_mapping        mappings; PUT adds fields (type changes are refused)
//   - GET /_settings[/{name}], GET /{index}/_settings[/{name}], PUT /_settings,
//     PUT /{index}/_settings: settings (flat_settings, include_defaults, name
//     filters); dynamic ones (refresh_interval, number_of_replicas,
//     max_result_window, gc_deletes, blocks.write) can be changed
//   - PUT /{index}/_block/write        add the index write block (index.blocks.write: true)
//   - PUT|POST /{index}/_doc/{id}, POST /{index}/_doc, PUT|POST /{index}/_create/{id},
//     GET|HEAD|DELETE /{index}/_doc/{id}, GET /{index}/_source/{id}, POST /{index}/_update/{id}
//   - POST /_bulk, POST /{index}/_bulk (index, create, delete, update with doc/upsert)
//   - GET|POST /_mget, /{index}/_mget (docs with _index/_id/_source, or ids)
//   - GET|POST /_refresh, /{index}/_refresh
//   - GET|POST /_search, /{targets}/_search, /_count, /{targets}/_count
//   - POST /_aliases, GET /_alias[/{name}], HEAD /_alias/{name}, GET /_aliases,
//     GET|HEAD|PUT|DELETE /{index}/_alias[/{name}]
//
// Field types: text, keyword, long, integer, short, byte, double, float,
// half_float, scaled_float, unsigned_long, date, date_nanos, boolean,
// object, multi-fields. The nested type is refused: there are no nested
// documents.
// Dynamic mapping follows Elasticsearch's default rules: strings become
// text with a keyword sub-field (ignore_above 256) unless they look like a
// date, integers long, other numbers float, booleans boolean, objects
// objects; "dynamic": true|false|strict is honoured. Writing to a missing
// index creates it, as action.auto_create_index does by default.
//
// Query DSL: match_all, match_none, match (operator, minimum_should_match,
// fuzziness, prefix_length, analyzer, lenient), multi_match (best_fields
// and most_fields per field, term-centric cross_fields; field boosts,
// wildcards, tie_breaker, analyzer, lenient), term, terms (within
// index.max_terms_count), range (numbers, dates with date math,
// keywords), bool (must, filter, should, must_not, minimum_should_match),
// exists, ids, prefix, wildcard, constant_score, and query_string for a
// subset of Lucene's syntax (terms, field:value, AND/OR/NOT/+/-, groups,
// wildcards, ranges, _exists_, term~, ^boost; default_field,
// default_operator, analyzer, lenient, analyze_wildcard), which q= URI
// search uses with df, default_operator, analyzer, lenient and
// analyze_wildcard. term, terms, match, ids and q= work on _id (and
// _index); queries given a _name are reported in matched_queries.
// Search options: from, size, sort (fields, _score, _doc; missing,
// unmapped_type, mode min/max, format), search_after, min_score,
// terminate_after, post_filter, _source filtering, track_total_hits, track_scores,
// version, seq_no_primary_term, rest_total_hits_as_int, typed_keys;
// unknown URL parameters are refused as Elasticsearch refuses them.
// Aggregations: terms, histogram, date_histogram (calendar_interval,
// fixed_interval, time_zone, offset, min_doc_count, extended_bounds) and
// the metrics sum, avg, min, max, value_count, stats and cardinality,
// nested to any depth under bucket aggregations, with "missing" and, on
// numeric fields, a DecimalFormat "format" (decformat.go). Index and alias
// names may be date math expressions (datemathnames.go). Unknown query or
// aggregation types are refused with parsing_exception; real
// Elasticsearch features that are not implemented (highlighting, scroll,
// scripts, phrase queries, ...) are refused with a 400 whose reason
// starts with "[eventpipe]".
//
// # Semantics
//
// Versions, sequence numbers and conflicts follow Elasticsearch:
// internal versions count up per document; version_type=external and
// external_gte accept a write only when the given version is greater (or
// equal) than the stored one; if_seq_no/if_primary_term give optimistic
// concurrency; _create refuses existing ids; every conflict is a 409
// version_conflict_engine_exception with Elasticsearch's reason texts.
// _seq_no grows per index with every operation and _primary_term is 1.
//
// index.blocks.write (set by the add index block API or the settings API,
// and persisted like every setting) refuses every document write to the
// index, through an alias or in a bulk item too, with 403
// cluster_block_exception; reads, search, mapping and settings changes and
// deleting the index still work. The other index blocks (read_only,
// read_only_allow_delete, read, metadata) are not enforced and therefore
// refused when turned on.
//
// Search is near-real-time as in Elasticsearch: GET by id and _mget are
// real time (unless realtime=false), a search sees every write acknowledged before the last refresh,
// and an index refreshes on its own every refresh_interval (Config
// RefreshInterval by default, "-1" disables it). refresh=true refreshes
// before answering; refresh=wait_for waits for the next refresh.
//
// # Durability
//
// Every change is appended to a write-ahead log in DataDir/state and
// fsynced before it is acknowledged; concurrent requests share one fsync
// (group commit). The log is periodically compacted into a snapshot. On
// start the server replays snapshot and log (cutting off a record torn by
// a crash), so every acknowledged write survives kill -9. Search indices
// (bleve, in DataDir/indices) are derived data: a refresh only ever applies
// writes that are already durable and records how far it got, so after a
// crash only the missing tail is re-indexed, and a lost or unreadable
// search index is rebuilt from the store.
//
// # Known differences from Elasticsearch
//
//   - One node and one shard per index: number_of_shards (and
//     number_of_routing_shards) other than 1 are refused; replicas are
//     reported as unassigned.
//   - Text analysis, matching and scoring come from bleve: the standard
//     analyzer is Unicode word segmentation plus lowercasing (as in
//     Elasticsearch), but BM25 scores differ numerically and terms queries
//     are scored rather than constant-score. Only the standard, simple,
//     whitespace and keyword analyzers exist; custom analysis settings,
//     normalizers and copy_to are refused.
//   - multi_match cross_fields groups text fields by their analyzer and
//     puts keyword, numeric, date and boolean fields into one group whose
//     only term is the whole query value (Elasticsearch groups by search
//     analyzer too; its keyword fields share the keyword analyzer). Each
//     term is looked for with a dis_max over the group's fields, without
//     Elasticsearch's blending of term statistics across fields, so scores
//     differ while the matching documents are the same. Fuzzy matching
//     expands a term to every indexed term within the edit distance
//     (max_expansions is not applied).
//   - Numbers are indexed as float64, so long values beyond 2^53 lose
//     precision in queries, sorts and aggregations (the stored _source keeps
//     them exactly). Dates have millisecond precision in queries, sorting
//     and aggregations (date_nanos too; its sort values are reported in
//     nanoseconds, read from _source).
//   - Delete tombstones are kept for index.gc_deletes (60s by default) like
//     Elasticsearch; a tombstone restored after a restart keeps its original
//     deletion time.
//   - GET, HEAD, _source and _mget read in real time by default; with
//     realtime=false they read the state of the last refresh, as
//     Elasticsearch does. stored_fields is refused.
//   - Custom routing (the routing parameter, alias routing, a required
//     _routing) is refused: one shard per index, no routing recorded.
//   - _update re-serialises the merged source, so its key order may change;
//     scripts are not supported.
//   - Sorting on _doc uses document id order; missing sort values are
//     reported as null in hit "sort" arrays.
//   - Unknown URL parameters are refused as Elasticsearch refuses them
//     ("request [...] contains unrecognized parameter: [x]"); real ones
//     that are not implemented are refused with an "[eventpipe]" reason.
//     filter_path applies to every response. Requests without a
//     Content-Type are accepted, alias filters are refused, and terms
//     aggregation counts are exact (doc_count_error_upper_bound is always
//     0).
package esserver
