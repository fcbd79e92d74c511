-- Sagas (package sagas): each instance's state, the inputs it handled,
-- its timeouts and the effects waiting to run, in one schema, one row set
-- per saga name. An input is handled in one transaction that records its
-- id in saga_inputs (a redelivery finds it), writes the instance's state,
-- its timeouts and its outbox rows; the outbox rows run after the commit
-- and are deleted once they ran.
CREATE TABLE saga_instances (
    saga       text        NOT NULL,
    instance   text        NOT NULL,
    state      jsonb       NOT NULL,
    -- outcome is empty while the instance runs, then how it ended.
    outcome    text        NOT NULL DEFAULT '',
    version    bigint      NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (saga, instance)
);

CREATE TABLE saga_inputs (
    saga       text        NOT NULL,
    input_id   text        NOT NULL,
    instance   text        NOT NULL,
    handled_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (saga, input_id)
);

CREATE TABLE saga_timeouts (
    saga     text        NOT NULL,
    instance text        NOT NULL,
    name     text        NOT NULL,
    due_at   timestamptz NOT NULL,
    PRIMARY KEY (saga, instance, name)
);

CREATE INDEX saga_timeouts_due ON saga_timeouts (saga, due_at);

-- kind is command (body: the command) or cancel (body: the command id,
-- its aggregate and the reason).
CREATE TABLE saga_outbox (
    seq        bigserial   PRIMARY KEY,
    saga       text        NOT NULL,
    instance   text        NOT NULL,
    kind       text        NOT NULL,
    body       jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX saga_outbox_saga ON saga_outbox (saga, seq);

---- create above / drop below ----

DROP TABLE saga_outbox;
DROP TABLE saga_timeouts;
DROP TABLE saga_inputs;
DROP TABLE saga_instances;
