-- The SQLite schema that applying every migration in order produces.
-- Generated: python tests/migration/test_sqlite_migrations.py --write
-- (tests/migration checks it; never edit it by hand, add a migration).

CREATE TABLE workflows (
    name        TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    fingerprint TEXT    NOT NULL,
    definition  TEXT    NOT NULL,
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
    input            TEXT,
    output           TEXT,
    error            TEXT,
    created_at       REAL    NOT NULL,
    started_at       REAL,
    finished_at      REAL,
    retry_of         TEXT,
    parent_run_id    TEXT,
    sla              REAL,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    owner            TEXT,
    heartbeat_at     REAL
, concurrency_key TEXT, max_runs_per_key INTEGER, wake_at REAL);

CREATE TABLE steps (
    run             INTEGER NOT NULL REFERENCES runs (id),
    step_id         TEXT    NOT NULL,
    position        INTEGER NOT NULL,
    status          TEXT    NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    output          TEXT,
    error           TEXT,
    started_at      REAL,
    finished_at     REAL,
    skip_reason     TEXT,
    fallback_used   INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL,
    worker          TEXT,
    UNIQUE (run, step_id)
);

CREATE TABLE attempts (
    run         INTEGER NOT NULL REFERENCES runs (id),
    step_id     TEXT    NOT NULL,
    attempt     INTEGER NOT NULL,
    fallback    INTEGER NOT NULL,
    status      TEXT    NOT NULL,
    started_at  REAL    NOT NULL,
    finished_at REAL,
    error       TEXT,
    worker      TEXT,
    start_seq   INTEGER NOT NULL,
    PRIMARY KEY (run, step_id, attempt, fallback)
) WITHOUT ROWID;

CREATE TABLE events (
    run     INTEGER NOT NULL REFERENCES runs (id),
    seq     INTEGER NOT NULL,
    at      REAL    NOT NULL,
    kind    TEXT    NOT NULL
            CHECK (kind = 'step' OR kind = 'attempt' OR kind = 'run' OR kind = 'note'),
    step_id TEXT,
    source  TEXT,
    target  TEXT,
    attempt INTEGER,
    data    TEXT,
    PRIMARY KEY (run, seq)
) WITHOUT ROWID;

CREATE TABLE schedule_fires (
    workflow  TEXT    NOT NULL,
    schedule  TEXT    NOT NULL,
    fire_time REAL    NOT NULL,
    run       INTEGER NOT NULL REFERENCES runs (id),
    PRIMARY KEY (workflow, schedule, fire_time)
) WITHOUT ROWID;

CREATE TABLE schedule_sightings (
    workflow   TEXT NOT NULL,
    schedule   TEXT NOT NULL,
    first_seen REAL NOT NULL,
    PRIMARY KEY (workflow, schedule)
) WITHOUT ROWID;

CREATE TABLE tickets (
    run        INTEGER NOT NULL REFERENCES runs (id),
    step_id    TEXT    NOT NULL,
    attempt    INTEGER NOT NULL,
    fallback   INTEGER NOT NULL,
    priority   REAL    NOT NULL,
    pool       TEXT,
    pool_limit INTEGER,
    payload    TEXT    NOT NULL,
    created_at REAL    NOT NULL,
    token      TEXT,
    claimed_by TEXT,
    expires_at REAL, rate_count INTEGER, rate_period REAL,
    PRIMARY KEY (run, step_id, attempt, fallback)
);

CREATE TABLE outcomes (
    run      INTEGER NOT NULL REFERENCES runs (id),
    step_id  TEXT    NOT NULL,
    attempt  INTEGER NOT NULL,
    fallback INTEGER NOT NULL,
    kind     TEXT    NOT NULL
             CHECK (kind = 'ok' OR kind = 'error' OR kind = 'interrupted'
                    OR kind = 'cancelled'),
    output   TEXT,
    error    TEXT,
    worker   TEXT,
    at       REAL    NOT NULL, logs TEXT,
    PRIMARY KEY (run, step_id, attempt, fallback)
);

CREATE TABLE pool_starts (
    pool TEXT NOT NULL,
    at   REAL NOT NULL
);

CREATE TABLE breakers (
    key     TEXT    NOT NULL PRIMARY KEY,
    state   TEXT    NOT NULL,
    version INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE step_cache (
    workflow   TEXT NOT NULL,
    step_id    TEXT NOT NULL,
    key_hash   TEXT NOT NULL,
    output     TEXT NOT NULL,
    run_id     TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (workflow, step_id, key_hash)
) WITHOUT ROWID;

CREATE TABLE hook_deliveries (
    hook        TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    received_at REAL NOT NULL,
    PRIMARY KEY (hook, delivery_id)
) WITHOUT ROWID;

CREATE TABLE step_journal (
    run     INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step_id TEXT    NOT NULL,
    name    TEXT    NOT NULL,
    value   TEXT    NOT NULL,
    attempt INTEGER NOT NULL,
    at      REAL    NOT NULL,
    UNIQUE (run, step_id, name)
);

CREATE TABLE run_events (
    run  INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    name TEXT    NOT NULL,
    data TEXT    NOT NULL,
    at   REAL    NOT NULL,
    UNIQUE (run, name)
);

CREATE TABLE run_tokens (
    run    INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    tokens INTEGER NOT NULL
);

CREATE TABLE step_tokens (
    run        INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step_id    TEXT    NOT NULL,
    prompt     INTEGER NOT NULL,
    completion INTEGER NOT NULL,
    total      INTEGER NOT NULL,
    PRIMARY KEY (run, step_id)
);

CREATE TABLE notification_outbox (
    id            TEXT    NOT NULL PRIMARY KEY,
    run_id        TEXT,
    event         TEXT    NOT NULL,
    step          TEXT    NOT NULL,
    target        TEXT    NOT NULL,
    shown         TEXT    NOT NULL,
    body          TEXT    NOT NULL,
    state         TEXT    NOT NULL,
    attempts      INTEGER NOT NULL,
    next_at       REAL    NOT NULL,
    created_at    REAL    NOT NULL,
    error         TEXT,
    claimed_by    TEXT,
    claimed_until REAL
) WITHOUT ROWID;

CREATE INDEX runs_by_created ON runs (created_at DESC);

CREATE INDEX runs_by_workflow ON runs (workflow, created_at DESC);

CREATE UNIQUE INDEX tickets_by_token ON tickets (token) WHERE token IS NOT NULL;

CREATE INDEX tickets_to_claim ON tickets (priority) WHERE token IS NULL;

CREATE INDEX tickets_by_expiry ON tickets (expires_at) WHERE token IS NOT NULL;

CREATE INDEX tickets_by_pool ON tickets (pool) WHERE token IS NOT NULL AND pool IS NOT NULL;

CREATE INDEX pool_starts_by_pool ON pool_starts (pool, at);

CREATE INDEX runs_by_concurrency_key ON runs (concurrency_key)
    WHERE concurrency_key IS NOT NULL
      AND (status = 'pending' OR status = 'running' OR status = 'waiting');

CREATE INDEX hook_deliveries_by_time ON hook_deliveries (received_at);

CREATE INDEX runs_waiting_since ON runs (created_at) WHERE status = 'waiting';

CREATE INDEX runs_children ON runs (parent_run_id, status) WHERE parent_run_id IS NOT NULL;

CREATE INDEX runs_unfinished ON runs (created_at)
    WHERE status = 'pending' OR status = 'running'
          OR (status = 'waiting' AND wake_at IS NOT NULL);

CREATE INDEX runs_by_finish ON runs (finished_at)
    WHERE parent_run_id IS NULL AND finished_at IS NOT NULL;

CREATE INDEX runs_retries ON runs (retry_of) WHERE retry_of IS NOT NULL;

CREATE INDEX schedule_fires_by_run ON schedule_fires (run);

CREATE INDEX step_cache_by_run ON step_cache (run_id);

CREATE INDEX notification_outbox_due ON notification_outbox (state, next_at);

CREATE INDEX notification_outbox_by_run ON notification_outbox (run_id) WHERE run_id IS NOT NULL;

CREATE INDEX notification_outbox_alerts ON notification_outbox (created_at)
    WHERE run_id IS NULL;

PRAGMA user_version = 17;
