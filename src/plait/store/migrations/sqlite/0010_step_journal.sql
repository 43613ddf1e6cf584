-- 0010_step_journal: the journaled calls of python steps (ctx.run; docs/python-api.md).
-- The conventions of 0001_initial hold.

-- One row per run, step and call name: the JSON result of the call, committed before
-- the step's code got it back.  The first value stored for a name stays (later
-- attempts of the step read it instead of calling again).  The rowid orders the rows
-- as they were stored.
CREATE TABLE step_journal (
    run     INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step_id TEXT    NOT NULL,
    name    TEXT    NOT NULL,
    value   TEXT    NOT NULL,  -- JSON (the text null for a null result)
    attempt INTEGER NOT NULL,  -- the attempt of the step that made the call
    at      REAL    NOT NULL,  -- epoch seconds
    UNIQUE (run, step_id, name)
);
