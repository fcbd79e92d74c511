-- A todo's message (the reference todo API's "message" field).
ALTER TABLE todos ADD COLUMN message text NOT NULL DEFAULT '';

---- create above / drop below ----

ALTER TABLE todos DROP COLUMN message;
