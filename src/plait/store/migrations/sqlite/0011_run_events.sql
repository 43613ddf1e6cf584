-- 0011_run_events: events sent to a run by name (plait signal; docs/waiting.md).
-- The conventions of 0001_initial hold.

-- One row per run and event name: the first event sent stays (every wait for that
-- name in the run gets its data), kept whether or not anything waits for it yet.
CREATE TABLE run_events (
    run  INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    name TEXT    NOT NULL,
    data TEXT    NOT NULL,  -- JSON (the text null for no data)
    at   REAL    NOT NULL,  -- epoch seconds
    UNIQUE (run, name)
);
