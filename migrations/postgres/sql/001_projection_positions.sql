-- What every projection has applied: the last sequence per aggregate,
-- written in the same transaction as the read-model rows it covers.
CREATE TABLE projection_positions (
    projection     text        NOT NULL,
    aggregate_type text        NOT NULL,
    aggregate_id   text        NOT NULL,
    seq            bigint      NOT NULL CHECK (seq > 0),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (projection, aggregate_type, aggregate_id)
);

---- create above / drop below ----

DROP TABLE projection_positions;
