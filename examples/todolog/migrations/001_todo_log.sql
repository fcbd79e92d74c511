-- One row per todo event: the example read model of examples/todolog.
CREATE TABLE todo_log (
    todo_id     text        NOT NULL,
    seq         bigint      NOT NULL,
    event_type  text        NOT NULL,
    title       text        NOT NULL DEFAULT '',
    occurred_at timestamptz NOT NULL,
    PRIMARY KEY (todo_id, seq)
);

---- create above / drop below ----

DROP TABLE todo_log;
