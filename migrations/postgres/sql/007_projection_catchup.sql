-- How far each new read model's catch-up from the event store has come
-- (projections.ResumeCatchUp): after_event is the id of the last event, in
-- event-id order, of the batch written in the same transaction as this
-- row, so a restarted catch-up reads only later events; done_at marks
-- the hand-over to the live topics. started_at is when the catch-up
-- began: the live consumer group starts a margin before it.
CREATE TABLE projection_catchup (
    projection  text        PRIMARY KEY,
    started_at  timestamptz NOT NULL,
    after_event text        NOT NULL DEFAULT '',
    events      bigint      NOT NULL DEFAULT 0 CHECK (events >= 0),
    done_at     timestamptz,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

---- create above / drop below ----

DROP TABLE projection_catchup;
