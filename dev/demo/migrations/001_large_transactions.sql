-- The demo's own read model (dev/demo): one row per bank-account
-- transaction of 1000 or more, with its description.
CREATE TABLE large_transactions (
    account_id  text        NOT NULL,
    seq         bigint      NOT NULL,
    amount      bigint      NOT NULL,
    description text        NOT NULL,
    occurred_at timestamptz NOT NULL,
    PRIMARY KEY (account_id, seq)
);

---- create above / drop below ----

DROP TABLE large_transactions;
