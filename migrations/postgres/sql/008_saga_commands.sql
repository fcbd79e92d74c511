-- The commands each saga sent (package sagas), recorded in the transaction
-- that queued them: a reply on the replies topic is taken as a step's
-- answer only for a command listed here, and only as the event store's
-- record of that command on this aggregate says, so a reply forged with a
-- saga-shaped command id changes nothing. Pruned with the inputs of
-- finished instances.
CREATE TABLE saga_commands (
    saga           text        NOT NULL,
    command_id     text        NOT NULL,
    instance       text        NOT NULL,
    aggregate_type text        NOT NULL,
    aggregate_id   text        NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (saga, command_id)
);

---- create above / drop below ----

DROP TABLE saga_commands;
