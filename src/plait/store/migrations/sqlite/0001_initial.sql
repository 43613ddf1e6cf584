-- 0001_initial: workflows, runs, steps, attempts and the event history.
--
-- Conventions of every plait SQLite table:
--   * JSON values are stored as TEXT written by json.dumps; SQL NULL means JSON null.
--   * Times are REAL seconds since the epoch (time.time()).
--   * Statuses are the lower-case names of plait.core.states (TEXT).
--   * Child tables refer to a run by its integer key ``runs.id`` (small and fast to
--     index); the public id (``runs.run_id``) appears once, in ``runs``.

-- Every stored version of every definition; name + version never changes.
CREATE TABLE workflows (
    name        TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    fingerprint TEXT    NOT NULL,
    definition  TEXT    NOT NULL,  -- JSON object
    created_at  REAL    NOT NULL,
    PRIMARY KEY (name, version)
);

CREATE TABLE runs (
    id               INTEGER PRIMARY KEY,
    run_id           TEXT    NOT NULL UNIQUE,
    workflow         TEXT    NOT NULL,
    version          INTEGER NOT NULL,
    fingerprint      TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    input            TEXT,              -- JSON
    output           TEXT,              -- JSON
    error            TEXT,
    created_at       REAL    NOT NULL,
    started_at       REAL,
    finished_at      REAL,
    retry_of         TEXT,              -- public id of the run this one retried
    parent_run_id    TEXT,              -- public id of the run whose step started it
    sla              REAL,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    owner            TEXT,              -- the process executing the run (claim_run)
    heartbeat_at     REAL
);

-- list_runs walks this index newest first and stops at the limit; rowid (runs.id)
-- ascending breaks ties, like the memory store's stable sort.
CREATE INDEX runs_by_created ON runs (created_at DESC);
CREATE INDEX runs_by_workflow ON runs (workflow, created_at DESC);

-- One row per step of a run, updated in place; ``position`` is definition order.
-- An ordinary (rowid) table: outputs may be large, and an update that leaves (run,
-- step_id) alone writes only the table page, not the index.
CREATE TABLE steps (
    run             INTEGER NOT NULL REFERENCES runs (id),
    step_id         TEXT    NOT NULL,
    position        INTEGER NOT NULL,
    status          TEXT    NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    output          TEXT,               -- JSON
    error           TEXT,
    started_at      REAL,
    finished_at     REAL,
    skip_reason     TEXT,
    fallback_used   INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL,
    worker          TEXT,
    UNIQUE (run, step_id)
);

-- One row per attempt (and per fallback attempt) of a step, keyed like AttemptChange.
-- ``start_seq`` is the seq of the event that started it: it orders attempts that
-- started at the same time in the order they were stored.
-- WITHOUT ROWID (here and for events): one b-tree, so a commit dirties one page per
-- table instead of a table page and an index page.
CREATE TABLE attempts (
    run         INTEGER NOT NULL REFERENCES runs (id),
    step_id     TEXT    NOT NULL,
    attempt     INTEGER NOT NULL,
    fallback    INTEGER NOT NULL,
    status      TEXT    NOT NULL,       -- running | completed | failed | cancelled
    started_at  REAL    NOT NULL,
    finished_at REAL,
    error       TEXT,
    worker      TEXT,
    start_seq   INTEGER NOT NULL,
    PRIMARY KEY (run, step_id, attempt, fallback)
) WITHOUT ROWID;

-- The append-only history of each run.  ``seq`` numbers a run's events from 1 without
-- gaps, in commit order (the next seq is read under the write lock), so a reader that
-- remembers the last seq it saw never misses or repeats an event.
--   kind 'step' and 'run': source -> target (source NULL for a run's creation);
--   kind 'attempt':        attempt number and its status in ``target``;
--   kind 'note':           ``data`` (JSON object).
CREATE TABLE events (
    run     INTEGER NOT NULL REFERENCES runs (id),
    seq     INTEGER NOT NULL,
    at      REAL    NOT NULL,
    -- written with OR: ``kind IN (...)`` costs a temporary b-tree per inserted row
    kind    TEXT    NOT NULL
            CHECK (kind = 'step' OR kind = 'attempt' OR kind = 'run' OR kind = 'note'),
    step_id TEXT,
    source  TEXT,
    target  TEXT,
    attempt INTEGER,
    data    TEXT,                       -- JSON
    PRIMARY KEY (run, seq)
) WITHOUT ROWID;
