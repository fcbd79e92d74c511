-- The version of a read model's definition that built its rows
-- (projections.CatchUpState.Version): a model whose declared version
-- differs is rebuilt beside the live one (projections.Rebuild) or by
-- `eventpipe replay`, and the swap records the new version. Rows written
-- before this migration were built by version 1.
ALTER TABLE projection_catchup
    ADD COLUMN version integer NOT NULL DEFAULT 1 CHECK (version >= 1);

-- What each consumer was when it last started (eventpipe.RecordDefinition):
-- its kind, topics, event types, declared version and, for a model, the
-- fingerprint of its schema (tables and migrations, or index settings and
-- mappings). previous holds the definition it replaced and changed_at when
-- it did, so that status shows what a deployment changed.
CREATE TABLE consumer_definitions (
    consumer    text        PRIMARY KEY,
    definition  jsonb       NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    previous    jsonb,
    changed_at  timestamptz
);

---- create above / drop below ----

DROP TABLE consumer_definitions;
ALTER TABLE projection_catchup DROP COLUMN version;
