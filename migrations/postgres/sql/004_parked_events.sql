-- Events a consumer parked (package parking): when an event fails
-- permanently, it and every later event of its aggregate are parked here,
-- in sequence order, while the consumer's other aggregates go on. An
-- aggregate is parked for a consumer as long as it has rows here;
-- `eventpipe parked replay` re-drives them and deletes them once applied.
-- consumer is the projection's name (as in projection_positions); the
-- envelope is the event as delivered (eventstore.Marshal).
CREATE TABLE parked_events (
    consumer       text        NOT NULL,
    aggregate_type text        NOT NULL,
    aggregate_id   text        NOT NULL,
    seq            bigint      NOT NULL CHECK (seq > 0),
    event_id       text        NOT NULL,
    event_type     text        NOT NULL,
    envelope       jsonb       NOT NULL,
    reason         text        NOT NULL,
    parked_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, aggregate_type, aggregate_id, seq)
);

---- create above / drop below ----

DROP TABLE parked_events;
