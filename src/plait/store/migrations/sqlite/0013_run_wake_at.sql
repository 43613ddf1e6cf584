-- 0013_run_wake_at: when a waiting run continues by itself (docs/waiting.md).
-- The conventions of 0001_initial hold.

-- A run stored ``waiting`` whose steps wait for a time (a sleep, a delay, a timeout)
-- keeps the earliest of those times, epoch seconds; NULL: no time (it waits for a
-- person, an event or a child run), or the run does not wait.
ALTER TABLE runs ADD COLUMN wake_at REAL;

-- Runs that may need a driver (runs_to_drive walks it oldest first): waiting runs with
-- a due time too.
DROP INDEX runs_unfinished;
CREATE INDEX runs_unfinished ON runs (created_at)
    WHERE status = 'pending' OR status = 'running'
          OR (status = 'waiting' AND wake_at IS NOT NULL);
