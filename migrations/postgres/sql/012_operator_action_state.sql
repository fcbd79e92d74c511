-- An operator action is recorded before it acts (state 'started', no
-- result yet) and finished after (state 'done', its result, finished_at),
-- so that a tool killed between its effect and its record leaves a
-- 'started' row that status shows, instead of an effect nobody recorded.
-- Rows written before this migration were recorded after the fact: done.
ALTER TABLE operator_actions
    ADD COLUMN state       text        NOT NULL DEFAULT 'done' CHECK (state IN ('started', 'done')),
    ADD COLUMN finished_at timestamptz;

---- create above / drop below ----

ALTER TABLE operator_actions DROP COLUMN state, DROP COLUMN finished_at;
