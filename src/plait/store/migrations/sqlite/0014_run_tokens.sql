-- 0014_run_tokens: the tokens model calls spent (limits.max_llm_tokens;
-- docs/limits.md).  The conventions of 0001_initial hold.

-- One row per run that spent tokens: the sum of the total_tokens of every model call
-- counted for it (its own, and those of its child runs at any depth): what its token
-- budget is judged by.
CREATE TABLE run_tokens (
    run    INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    tokens INTEGER NOT NULL
);

-- One row per step that sent model calls: the sums of their usage (every attempt's,
-- llm steps and ctx.llm alike), added in the transaction that adds to run_tokens.
CREATE TABLE step_tokens (
    run        INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step_id    TEXT    NOT NULL,
    prompt     INTEGER NOT NULL,
    completion INTEGER NOT NULL,
    total      INTEGER NOT NULL,
    PRIMARY KEY (run, step_id)
);
