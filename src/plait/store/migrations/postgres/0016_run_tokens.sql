-- 0016_run_tokens: the tokens model calls spent (limits.max_llm_tokens;
-- docs/limits.md).  The conventions of 0001_initial hold.

-- One row per run that spent tokens: the sum of the total_tokens of every model call
-- counted for it (its own, and those of its child runs at any depth): what its token
-- budget is judged by, added to by every worker that sends one of its calls.
CREATE TABLE run_tokens (
    run    bigint PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    tokens bigint NOT NULL
);

-- One row per step that sent model calls: the sums of their usage (every attempt's,
-- llm steps and ctx.llm alike), added in the statement that adds to run_tokens.
CREATE TABLE step_tokens (
    run        bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step_id    text   NOT NULL,
    prompt     bigint NOT NULL,
    completion bigint NOT NULL,
    total      bigint NOT NULL,
    PRIMARY KEY (run, step_id)
);
