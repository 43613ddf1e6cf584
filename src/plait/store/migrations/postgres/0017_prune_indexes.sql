-- 0017_prune_indexes: what retention (plait prune, PLAIT_RETENTION; docs/retention.md)
-- finds and deletes runs by.  The conventions of 0001_initial hold.

-- The finished runs with no parent, oldest finish first: where a prune starts.
CREATE INDEX runs_by_finish ON runs (finished_at, id)
    WHERE parent_run_id IS NULL AND finished_at IS NOT NULL;

-- The retries of a run: a run stays while a retry of it is unfinished.
CREATE INDEX runs_retries ON runs (retry_of) WHERE retry_of IS NOT NULL;

-- A run's schedule fire and the cache entries it created, deleted with it.
CREATE INDEX schedule_fires_by_run ON schedule_fires (run_id);

CREATE INDEX step_cache_by_run ON step_cache (run_id);
