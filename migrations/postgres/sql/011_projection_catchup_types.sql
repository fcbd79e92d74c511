-- The event types a read model's catch-up covers (projections.CatchUpState):
-- event_types are the types whose history the read model holds once the
-- catch-up is done; skip_types those an earlier, finished catch-up already
-- covered, which a catch-up of types the read model gained does not read
-- again. Empty in rows written before: the read model's types then.
ALTER TABLE projection_catchup
    ADD COLUMN event_types text[] NOT NULL DEFAULT '{}',
    ADD COLUMN skip_types  text[] NOT NULL DEFAULT '{}';

---- create above / drop below ----

ALTER TABLE projection_catchup DROP COLUMN event_types, DROP COLUMN skip_types;
