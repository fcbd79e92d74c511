-- Operator tools (issue 27).
--
-- poison_redrives: one row per poison message re-driven by `eventpipe
-- poison redrive` (package poison), keyed by where the message sits on
-- its poison topic. The row is written with state 'started' (committed)
-- before the message is published to its original topic, and set to
-- 'done' after the broker acknowledged the copy; a
-- second redrive of a 'done' row publishes nothing, and one that finds a
-- 'started' row first looks on the target topic for the copy (header
-- eventpipe_redriven_from) before it publishes.
CREATE TABLE poison_redrives (
    poison_topic     text        NOT NULL,
    poison_partition integer     NOT NULL,
    poison_offset    bigint      NOT NULL CHECK (poison_offset >= 0),
    message_uuid     text        NOT NULL,
    target_topic     text        NOT NULL,
    state            text        NOT NULL CHECK (state IN ('started', 'done')),
    actor            text        NOT NULL,
    started_at       timestamptz NOT NULL DEFAULT now(),
    done_at          timestamptz,
    PRIMARY KEY (poison_topic, poison_partition, poison_offset)
);

-- skipped_events: the parked events `eventpipe parked skip` released
-- without applying them (package parking), with who skipped them and why.
CREATE TABLE skipped_events (
    consumer       text        NOT NULL,
    aggregate_type text        NOT NULL,
    aggregate_id   text        NOT NULL,
    seq            bigint      NOT NULL CHECK (seq > 0),
    event_id       text        NOT NULL,
    event_type     text        NOT NULL,
    envelope       jsonb       NOT NULL,
    parked_reason  text        NOT NULL,
    actor          text        NOT NULL,
    reason         text        NOT NULL,
    skipped_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, aggregate_type, aggregate_id, seq)
);

-- operator_actions: every operator action (poison redrive, parked replay,
-- parked skip), newest last by id.
CREATE TABLE operator_actions (
    id     bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at     timestamptz NOT NULL DEFAULT now(),
    actor  text        NOT NULL,
    action text        NOT NULL,
    target text        NOT NULL,
    reason text        NOT NULL DEFAULT '',
    result text        NOT NULL
);

---- create above / drop below ----

DROP TABLE operator_actions;
DROP TABLE skipped_events;
DROP TABLE poison_redrives;
