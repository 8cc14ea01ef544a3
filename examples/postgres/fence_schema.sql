-- The fence: the newest fencing token written per resource. A fenced write
-- first moves its resource's row to its own token, in the same transaction,
-- and only if no newer token is there (etcdlock's fencing helpers do this).
CREATE TABLE etcdlock_fence (
    resource text PRIMARY KEY,
    token    bigint NOT NULL
);

-- The data the lock protects in the examples: an account's balance.
CREATE TABLE accounts (
    id      text PRIMARY KEY,
    balance bigint NOT NULL
);
