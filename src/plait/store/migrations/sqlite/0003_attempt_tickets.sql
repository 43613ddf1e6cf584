-- 0003_attempt_tickets: claimable attempts (tickets) and the outcome inbox (issue 11;
-- the contract is plait.store.base's docstring).  The conventions of 0001_initial hold.

-- An attempt a run's driver stored for any worker to claim.  token, claimed_by and
-- expires_at are NULL until it is claimed; expires_at is the store's time.time().
-- The implicit rowid is the order tickets were stored in (a new row takes the largest
-- rowid + 1), which breaks ties of priority.
CREATE TABLE tickets (
    run        INTEGER NOT NULL REFERENCES runs (id),
    step_id    TEXT    NOT NULL,
    attempt    INTEGER NOT NULL,
    fallback   INTEGER NOT NULL,
    priority   REAL    NOT NULL,  -- lower is claimed first
    pool       TEXT,
    pool_limit INTEGER,           -- claimed tickets of the pool at most; NULL: no limit
    payload    TEXT    NOT NULL,  -- JSON, opaque to the store
    created_at REAL    NOT NULL,
    token      TEXT,
    claimed_by TEXT,
    expires_at REAL,
    PRIMARY KEY (run, step_id, attempt, fallback)
);

-- Claimed tickets by their token (unique: a fresh uuid4 per claim).
CREATE UNIQUE INDEX tickets_by_token ON tickets (token) WHERE token IS NOT NULL;

-- The claim order of the tickets nobody holds.
CREATE INDEX tickets_to_claim ON tickets (priority) WHERE token IS NULL;

-- Expired leases, for the reapers.
CREATE INDEX tickets_by_expiry ON tickets (expires_at) WHERE token IS NOT NULL;

-- Claimed tickets per pool, for pool admission.
CREATE INDEX tickets_by_pool ON tickets (pool) WHERE token IS NOT NULL AND pool IS NOT NULL;

-- How attempts ended, until the run's driver applies them; at most one per attempt.
-- The rowid is the order they arrived in.
CREATE TABLE outcomes (
    run      INTEGER NOT NULL REFERENCES runs (id),
    step_id  TEXT    NOT NULL,
    attempt  INTEGER NOT NULL,
    fallback INTEGER NOT NULL,
    kind     TEXT    NOT NULL
             CHECK (kind = 'ok' OR kind = 'error' OR kind = 'interrupted'
                    OR kind = 'cancelled'),
    output   TEXT,  -- JSON
    error    TEXT,  -- JSON object
    worker   TEXT,
    at       REAL    NOT NULL,
    PRIMARY KEY (run, step_id, attempt, fallback)
);

-- Runs that may need a driver (runs_to_drive walks it oldest first).
CREATE INDEX runs_unfinished ON runs (created_at)
    WHERE status = 'pending' OR status = 'running';
