-- Saga operator tools (issue 27: `eventpipe sagas abort|retry`, package
-- sagas' Operator).
--
-- saga_commands.body: the command as the saga sent it, written with its
-- outbox row, so that `sagas retry` can send a command that got no answer
-- again under its own id (the command handlers dedupe it). NULL for
-- commands queued before this migration and for rows a cancel wrote.
ALTER TABLE saga_commands ADD COLUMN body jsonb;

-- saga_instances.aborted_*: an operator's abort of the instance (who,
-- why, when), written in the transaction that hands the abort to the
-- saga (its compensation's effects go through saga_outbox like any
-- other). NULL for an instance never aborted.
ALTER TABLE saga_instances
    ADD COLUMN aborted_by   text,
    ADD COLUMN abort_reason text,
    ADD COLUMN aborted_at   timestamptz;

---- create above / drop below ----

ALTER TABLE saga_instances DROP COLUMN aborted_at, DROP COLUMN abort_reason, DROP COLUMN aborted_by;
ALTER TABLE saga_commands DROP COLUMN body;
