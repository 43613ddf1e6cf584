-- 0005_concurrency_keys: runs bounded per concurrency key (docs/schedules.md).  The conventions
-- of 0001_initial hold.  Runs stored before this migration have no key (NULL).

-- The run's key, rendered from its input when it was created, and how many runs of
-- the key may hold a slot at once (both NULL: no key; see claim_run).
ALTER TABLE runs ADD COLUMN concurrency_key TEXT;
ALTER TABLE runs ADD COLUMN max_runs_per_key INTEGER;

-- The unfinished runs of each key: what claim_run counts the slots taken in.
CREATE INDEX runs_by_concurrency_key ON runs (concurrency_key)
    WHERE concurrency_key IS NOT NULL
      AND (status = 'pending' OR status = 'running' OR status = 'waiting');
