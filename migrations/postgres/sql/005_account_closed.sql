-- A closed bank account (bankaccount.AccountClosed): the row stays, with
-- its balance and transactions; closed_at is when it was closed.
ALTER TABLE accounts
    ADD COLUMN closed    boolean     NOT NULL DEFAULT false,
    ADD COLUMN closed_at timestamptz;

---- create above / drop below ----

ALTER TABLE accounts
    DROP COLUMN closed_at,
    DROP COLUMN closed;
