-- 0008_step_cache: results of steps with `cache: {key, ttl}` (docs/caching.md), shared by every
-- process on the store.  The conventions of 0001_initial hold.

-- One row per workflow name, step id and rendered key (key_hash: the SHA-256 of the
-- key in hex, so a long key costs a fixed-size index entry): the newest completed
-- result.  A reader takes it when created_at is within its step's ttl.
CREATE TABLE step_cache (
    workflow   TEXT NOT NULL,
    step_id    TEXT NOT NULL,
    key_hash   TEXT NOT NULL,
    output     TEXT NOT NULL,  -- JSON (the text null for a null output)
    run_id     TEXT NOT NULL,  -- the run whose step completed with it
    created_at REAL NOT NULL,  -- epoch seconds
    PRIMARY KEY (workflow, step_id, key_hash)
) WITHOUT ROWID;
