-- 0004_pool_rates_breakers: limits that hold across every process sharing the file
-- (docs/workers.md): a pool's rate judged when a ticket is claimed, and circuit breakers'
-- state.  The conventions of 0001_initial hold.

-- The rate of a ticket's pool (Ticket.rate_count / rate_period; NULL: none).
ALTER TABLE tickets ADD COLUMN rate_count INTEGER;
ALTER TABLE tickets ADD COLUMN rate_period REAL;

-- When rated tickets of each pool were claimed (the store's time.time()), the log a
-- claim judges a pool's rate window with; a claim deletes what fell out of the window.
CREATE TABLE pool_starts (
    pool TEXT NOT NULL,
    at   REAL NOT NULL
);
CREATE INDEX pool_starts_by_pool ON pool_starts (pool, at);

-- The state of each circuit breaker (core.guards.CircuitBreaker.to_json; opaque to
-- the store) and its version, which every update moves by one (a compare-and-set).
CREATE TABLE breakers (
    key     TEXT    NOT NULL PRIMARY KEY,
    state   TEXT    NOT NULL,  -- JSON object
    version INTEGER NOT NULL
) WITHOUT ROWID;
