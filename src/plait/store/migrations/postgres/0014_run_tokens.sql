-- 0014_run_tokens: the tokens a run's model calls spent (limits.max_llm_tokens;
-- docs/limits.md).  The conventions of 0001_initial hold.

-- One row per run that spent tokens: the sum of the total_tokens of every model call
-- counted for it (its own, and those of its child runs at any depth), added to by
-- every worker that runs one of its calls.
CREATE TABLE run_tokens (
    run    bigint PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    tokens bigint NOT NULL
);
