-- 0012_step_journal: the journaled calls of python steps (ctx.run; docs/python-api.md).
-- The conventions of 0001_initial hold.

-- One row per run, step and call name: the JSON result of the call, committed before
-- the step's code got it back.  The first value stored for a name stays (later
-- attempts of the step, on any worker, read it instead of calling again); id orders
-- the rows as they were stored.
CREATE TABLE step_journal (
    id      bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    run     bigint           NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step_id text             NOT NULL,
    name    text             NOT NULL,
    value   json             NOT NULL,  -- the JSON null for a null result
    attempt integer          NOT NULL,  -- the attempt of the step that made the call
    at      double precision NOT NULL,  -- epoch seconds
    PRIMARY KEY (run, step_id, name)
);
