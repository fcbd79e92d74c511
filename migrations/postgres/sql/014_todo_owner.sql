-- A todo's owner: the verified subject that created it (TodoCreated's
-- "owner"), '' when its creator was only claimed. GET /todo lists a
-- subject's own todos with it when the policy grants "own" reads. Rows
-- built before this migration have no owner until the todos model
-- (version 2) is rebuilt, which its runner does on start.
ALTER TABLE todos ADD COLUMN owner text NOT NULL DEFAULT '';
CREATE INDEX todos_live_by_owner ON todos (owner, todo_id) WHERE NOT deleted;

---- create above / drop below ----

DROP INDEX todos_live_by_owner;
ALTER TABLE todos DROP COLUMN owner;
