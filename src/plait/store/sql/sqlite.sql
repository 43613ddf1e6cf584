-- The SQLite store's queries (plait.store.sqlite), one named block each.
--
-- A block starts with a line ``-- name --``; the comment lines under it say what the
-- query does and list its parameters in order.  Parameters are positional (``?``) and
-- always bound: nothing a user types is ever spliced into SQL.  JSON columns hold
-- json.dumps text, SQL NULL meaning JSON null (see migrations/sqlite/0001_initial.sql).

-- latest_workflow --
-- The highest stored version of a workflow.  (name)
SELECT name, version, fingerprint, definition, created_at
FROM workflows WHERE name = ? ORDER BY version DESC LIMIT 1;

-- workflow_version --
-- One stored version of a workflow.  (name, version)
SELECT name, version, fingerprint, definition, created_at
FROM workflows WHERE name = ? AND version = ?;

-- insert_workflow --
-- Store a new version; (name, version) is the primary key, so a version is never
-- overwritten.  (name, version, fingerprint, definition, created_at)
INSERT INTO workflows (name, version, fingerprint, definition, created_at)
VALUES (?, ?, ?, ?, ?);

-- list_workflows --
-- Every version of every workflow: names in the order they were first stored,
-- versions ascending (the memory store's order).  ()
SELECT name, version, fingerprint, definition, created_at
FROM workflows AS w
ORDER BY (SELECT min(rowid) FROM workflows AS f WHERE f.name = w.name), version;

-- insert_run --
-- A new run.  A second run with the same public id violates runs.run_id UNIQUE.
-- (run_id, workflow, version, fingerprint, status, input, output, error, created_at,
--  started_at, finished_at, retry_of, parent_run_id, sla, cancel_requested, owner,
--  heartbeat_at)
INSERT INTO runs (run_id, workflow, version, fingerprint, status, input, output, error,
                  created_at, started_at, finished_at, retry_of, parent_run_id, sla,
                  cancel_requested, owner, heartbeat_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- insert_step --
-- One pending step of a new run.  (run, step_id, position, status)
INSERT INTO steps (run, step_id, position, status) VALUES (?, ?, ?, ?);

-- run_key --
-- The integer key of a run, found by its public id.  (run_id)
SELECT id FROM runs WHERE run_id = ?;

-- run_status --
-- The stored status of a run, by its integer key.  (id)
SELECT status FROM runs WHERE id = ?;

-- get_run --
-- Everything about one run.  (run_id)
SELECT run_id, workflow, version, fingerprint, status, input, output, error, created_at,
       started_at, finished_at, retry_of, parent_run_id, sla, cancel_requested, owner,
       heartbeat_at
FROM runs WHERE run_id = ?;

-- list_runs --
-- Runs newest first, optionally of one status and created since a time (a filter is
-- ignored when its parameter is NULL); ties keep the order the runs were created in.
-- Walks runs_by_created and stops at the limit.  (status, since, limit)
SELECT run_id, workflow, version, fingerprint, status, input, output, error, created_at,
       started_at, finished_at, retry_of, parent_run_id, sla, cancel_requested, owner,
       heartbeat_at
FROM runs
WHERE (?1 IS NULL OR status = ?1)
  AND (?2 IS NULL OR created_at >= ?2)
ORDER BY created_at DESC, id ASC
LIMIT ?3;

-- list_workflow_runs --
-- The same for the runs of one workflow, through runs_by_workflow.
-- (workflow, status, since, limit)
SELECT run_id, workflow, version, fingerprint, status, input, output, error, created_at,
       started_at, finished_at, retry_of, parent_run_id, sla, cancel_requested, owner,
       heartbeat_at
FROM runs
WHERE workflow = ?1
  AND (?2 IS NULL OR status = ?2)
  AND (?3 IS NULL OR created_at >= ?3)
ORDER BY created_at DESC, id ASC
LIMIT ?4;

-- update_step --
-- Store a step's row after one change, only if it still has the status the change
-- moves it from: 0 rows changed means a stale write (or an unknown step).
-- (status, attempts, output, error, started_at, finished_at, skip_reason,
--  fallback_used, next_attempt_at, worker, run, step_id, expected_status)
UPDATE steps
SET status = ?, attempts = ?, output = ?, error = ?, started_at = ?, finished_at = ?,
    skip_reason = ?, fallback_used = ?, next_attempt_at = ?, worker = ?
WHERE run = ? AND step_id = ? AND status = ?;

-- step_status --
-- The stored status of one step (to explain a refused batch).  (run, step_id)
SELECT status FROM steps WHERE run = ? AND step_id = ?;

-- upsert_attempt --
-- An attempt starts (new row) or ends (the row exists: status, end time and error
-- change; start time and worker stay).
-- (run, step_id, attempt, fallback, status, at, finished_at, error, worker, seq)
INSERT INTO attempts (run, step_id, attempt, fallback, status, started_at, finished_at,
                      error, worker, start_seq)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
ON CONFLICT (run, step_id, attempt, fallback)
DO UPDATE SET status = ?5, finished_at = ?6, error = ?8;

-- move_run --
-- A run moves to a non-final status; started_at is set by the first move to running.
-- (status, started_at_if_first_running, id)
UPDATE runs SET status = ?, started_at = coalesce(started_at, ?) WHERE id = ?;

-- finish_run --
-- A run reaches a final status with its output and error.
-- (status, finished_at, output, error, id)
UPDATE runs SET status = ?, finished_at = ?, output = ?, error = ? WHERE id = ?;

-- last_seq --
-- The seq of a run's latest event (0 for none); read under the write lock, so the
-- next events are numbered from it.  (run)
SELECT coalesce(max(seq), 0) FROM events WHERE run = ?;

-- insert_event --
-- Append to a run's history.  (run, seq, at, kind, step_id, source, target, attempt,
-- data)
INSERT INTO events (run, seq, at, kind, step_id, source, target, attempt, data)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?);

-- get_steps --
-- A run's steps in definition order.  (run)
SELECT step_id, status, attempts, output, error, started_at, finished_at, skip_reason,
       fallback_used, next_attempt_at, worker
FROM steps WHERE run = ? ORDER BY position;

-- get_attempts --
-- A run's attempts by start time; ties keep the order they were stored in.  (run)
SELECT step_id, attempt, fallback, status, started_at, finished_at, error, worker
FROM attempts WHERE run = ? ORDER BY started_at, start_seq;

-- get_events --
-- A run's history after a given seq, in order.  (run, after)
SELECT seq, at, kind, step_id, source, target, attempt, data
FROM events WHERE run = ? AND seq > ? ORDER BY seq;

-- request_cancel --
-- Flag a run for cancellation (not a transition: the status is unchanged).  (run_id)
UPDATE runs SET cancel_requested = 1 WHERE run_id = ?;

-- claim_run --
-- Take a run when it has no owner, is already this owner's, is still held by the
-- owner known to be dead (NULL: none), or its owner's heartbeat is older than the
-- lease.  One statement: atomic across processes.
-- (owner, now, run_id, stale_before = now - lease, dead_owner)
UPDATE runs SET owner = ?1, heartbeat_at = ?2
WHERE run_id = ?3
  AND (owner IS NULL OR owner = ?1 OR owner = ?5
       OR (heartbeat_at IS NOT NULL AND heartbeat_at < ?4));

-- heartbeat --
-- Refresh ownership; 0 rows changed means the owner lost the run.  (now, run_id, owner)
UPDATE runs SET heartbeat_at = ? WHERE run_id = ? AND owner = ?;

-- release_run --
-- Give up ownership; no effect unless the owner holds the run.  (run_id, owner)
UPDATE runs SET owner = NULL WHERE run_id = ? AND owner = ?;

-- workflow_versions --
-- The stored versions of a workflow, ascending (to say which exist).  (name)
SELECT version FROM workflows WHERE name = ? ORDER BY version;

-- standing_decision --
-- The first decision stored on an approval step: its note's data, or no row.  Read
-- under the write lock by record_decision, so it is a compare-and-set.  (run, step_id)
SELECT data FROM events
WHERE run = ? AND kind = 'note' AND step_id = ?
  AND json_extract(data, '$.approval') IS NOT NULL
ORDER BY seq LIMIT 1;

-- fire_taken --
-- Whether a fire of a schedule is recorded already (read under the write lock by
-- claim_fire, so the check and the insert below are one compare-and-set).
-- (workflow, schedule, fire_time)
SELECT 1 FROM schedule_fires WHERE workflow = ? AND schedule = ? AND fire_time = ?;

-- insert_fire --
-- Record a fire with the run it started; the primary key refuses a second one.
-- (workflow, schedule, fire_time, run)
INSERT INTO schedule_fires (workflow, schedule, fire_time, run) VALUES (?, ?, ?, ?);

-- insert_sighting --
-- A schedule's first sighting; no effect when one is recorded.
-- (workflow, schedule, first_seen)
INSERT INTO schedule_sightings (workflow, schedule, first_seen) VALUES (?, ?, ?)
ON CONFLICT (workflow, schedule) DO NOTHING;

-- last_fire --
-- The latest of a schedule's fire times and its first sighting (NULL: neither).
-- (workflow, schedule)
SELECT max(at) FROM (
    SELECT max(fire_time) AS at FROM schedule_fires WHERE workflow = ?1 AND schedule = ?2
    UNION ALL
    SELECT first_seen FROM schedule_sightings WHERE workflow = ?1 AND schedule = ?2);
