-- Read models of the example domains. apply_count counts the events
-- applied to a row, so tests can prove none was applied twice.

CREATE TABLE accounts (
    account_id   text        PRIMARY KEY,
    owner_first  text        NOT NULL DEFAULT '',
    owner_last   text        NOT NULL DEFAULT '',
    balance      bigint      NOT NULL DEFAULT 0,
    version      bigint      NOT NULL,
    apply_count  bigint      NOT NULL DEFAULT 0,
    opened_at    timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);

CREATE TABLE account_transactions (
    account_id   text        NOT NULL REFERENCES accounts (account_id),
    seq          bigint      NOT NULL,
    description  text        NOT NULL DEFAULT '',
    amount       bigint      NOT NULL,
    balance      bigint      NOT NULL,
    occurred_at  timestamptz NOT NULL,
    PRIMARY KEY (account_id, seq)
);

CREATE TABLE orders (
    order_id        text        PRIMARY KEY,
    customer        text        NOT NULL DEFAULT '',
    status          text        NOT NULL,
    total           bigint      NOT NULL DEFAULT 0,
    paid            bigint      NOT NULL DEFAULT 0,
    refunded        bigint      NOT NULL DEFAULT 0,
    tracking_number text        NOT NULL DEFAULT '',
    placed_at       timestamptz,
    paid_at         timestamptz,
    shipped_at      timestamptz,
    delivered_at    timestamptz,
    refunded_at     timestamptz,
    version         bigint      NOT NULL,
    apply_count     bigint      NOT NULL DEFAULT 0
);
CREATE INDEX orders_status ON orders (status);

CREATE TABLE todos (
    todo_id      text        PRIMARY KEY,
    title        text        NOT NULL DEFAULT '',
    completed    boolean     NOT NULL DEFAULT false,
    deleted      boolean     NOT NULL DEFAULT false,
    version      bigint      NOT NULL,
    apply_count  bigint      NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);
CREATE INDEX todos_live ON todos (todo_id) WHERE NOT deleted;

---- create above / drop below ----

DROP TABLE todos;
DROP TABLE orders;
DROP TABLE account_transactions;
DROP TABLE accounts;
