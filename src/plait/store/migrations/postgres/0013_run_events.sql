-- 0013_run_events: events sent to a run by name (plait signal; docs/waiting.md).
-- The conventions of 0001_initial hold.

-- One row per run and event name: the first event sent stays (every wait for that
-- name in the run, on any worker, gets its data), kept whether or not anything waits
-- for it yet.
CREATE TABLE run_events (
    run  bigint           NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    name text             NOT NULL,
    data json             NOT NULL,  -- the JSON null for no data
    at   double precision NOT NULL,  -- epoch seconds
    PRIMARY KEY (run, name)
);
