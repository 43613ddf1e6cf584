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

-- workflow_by_fingerprint --
-- The highest stored version of a workflow with this fingerprint (a definition
-- stored already reuses its version).  (name, fingerprint)
SELECT name, version, fingerprint, definition, created_at
FROM workflows WHERE name = ? AND fingerprint = ? ORDER BY version DESC LIMIT 1;

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
--  heartbeat_at, concurrency_key, max_runs_per_key)
INSERT INTO runs (run_id, workflow, version, fingerprint, status, input, output, error,
                  created_at, started_at, finished_at, retry_of, parent_run_id, sla,
                  cancel_requested, owner, heartbeat_at, concurrency_key,
                  max_runs_per_key)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

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
       heartbeat_at, concurrency_key, max_runs_per_key, wake_at
FROM runs WHERE run_id = ?;

-- list_runs --
-- Runs newest first, optionally of one status and created since a time (a filter is
-- ignored when its parameter is NULL), and only those without a parent when top_level
-- is 1; ties keep the order the runs were created in.
-- Walks runs_by_created and stops at the limit.  (status, since, limit, before,
-- top_level)
SELECT run_id, workflow, version, fingerprint, status, input, output, error, created_at,
       started_at, finished_at, retry_of, parent_run_id, sla, cancel_requested, owner,
       heartbeat_at, concurrency_key, max_runs_per_key, wake_at
FROM runs
WHERE (?1 IS NULL OR status = ?1)
  AND (?2 IS NULL OR created_at >= ?2)
  AND (?4 IS NULL OR created_at <= ?4)
  AND (?5 = 0 OR parent_run_id IS NULL)
ORDER BY created_at DESC, id ASC
LIMIT ?3;

-- list_workflow_runs --
-- The same for the runs of one workflow, through runs_by_workflow.
-- (workflow, status, since, limit, before, top_level)
SELECT run_id, workflow, version, fingerprint, status, input, output, error, created_at,
       started_at, finished_at, retry_of, parent_run_id, sla, cancel_requested, owner,
       heartbeat_at, concurrency_key, max_runs_per_key, wake_at
FROM runs
WHERE workflow = ?1
  AND (?2 IS NULL OR status = ?2)
  AND (?3 IS NULL OR created_at >= ?3)
  AND (?5 IS NULL OR created_at <= ?5)
  AND (?6 = 0 OR parent_run_id IS NULL)
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

-- run_owner --
-- Who drives a run (NULL: nobody), by its integer key (a batch's owner check).  (id)
SELECT owner FROM runs WHERE id = ?;

-- step_status --
-- The stored status of one step (to explain a refused batch).  (run, step_id)
SELECT status FROM steps WHERE run = ? AND step_id = ?;

-- upsert_attempt --
-- An attempt starts (new row) or ends (the row exists: status, end time and error
-- change, and the worker when the end names one: the process that executed it, which
-- on a cluster is known only then; the start time stays).
-- (run, step_id, attempt, fallback, status, at, finished_at, error, worker, seq)
INSERT INTO attempts (run, step_id, attempt, fallback, status, started_at, finished_at,
                      error, worker, start_seq)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
ON CONFLICT (run, step_id, attempt, fallback)
DO UPDATE SET status = ?5, finished_at = ?6, error = ?8, worker = coalesce(?9, worker);

-- move_run --
-- A run moves to a non-final status; started_at is set by the first move to running;
-- wake_at is the due time of a run that waits (NULL otherwise).
-- (status, started_at_if_first_running, wake_at, id)
UPDATE runs SET status = ?, started_at = coalesce(started_at, ?), wake_at = ? WHERE id = ?;

-- finish_run --
-- A run reaches a final status with its output and error.
-- (status, finished_at, output, error, id)
UPDATE runs SET status = ?, finished_at = ?, output = ?, error = ?, wake_at = NULL
WHERE id = ?;

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

-- get_steps_by_id --
-- The named steps of a run (a JSON array of ids) in definition order.  (run, ids)
SELECT step_id, status, attempts, output, error, started_at, finished_at, skip_reason,
       fallback_used, next_attempt_at, worker
FROM steps WHERE run = ? AND step_id IN (SELECT value FROM json_each(?))
ORDER BY position;

-- get_attempts --
-- A run's attempts by start time; ties keep the order they were stored in.  (run)
SELECT step_id, attempt, fallback, status, started_at, finished_at, error, worker
FROM attempts WHERE run = ? ORDER BY started_at, start_seq;

-- parents_to_wake --
-- Waiting runs with a step that waits for a child run that has ended: a step stored
-- waiting whose latest wait note ({"wait": {"kind": "child", "child_run_id"}}) names a
-- run stored final.  Only the waiting runs (runs_waiting_since) with a child that
-- ended (runs_children) have their notes read, once each.  Oldest first.  (limit)
SELECT p.run_id FROM runs AS p
WHERE p.status = 'waiting'
  AND EXISTS (SELECT 1 FROM runs AS c
              WHERE c.parent_run_id = p.run_id
                AND c.status IN ('completed', 'failed', 'cancelled'))
  AND EXISTS (
      SELECT 1
      FROM (SELECT w.step_id, max(w.seq) AS seq FROM events AS w
            WHERE w.run = p.id AND w.kind = 'note'
              AND json_extract(w.data, '$.wait') IS NOT NULL
            GROUP BY w.step_id) AS latest
      JOIN steps AS s ON s.run = p.id AND s.step_id = latest.step_id
      JOIN events AS e ON e.run = p.id AND e.seq = latest.seq
      JOIN runs AS c ON c.run_id = json_extract(e.data, '$.wait.child_run_id')
      WHERE s.status = 'waiting' AND json_extract(e.data, '$.wait.kind') = 'child'
        AND c.status IN ('completed', 'failed', 'cancelled'))
ORDER BY p.created_at, p.id LIMIT ?;

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
-- lease.  A pending or waiting run with a concurrency key that is not this owner's
-- already (and whose cancel was not requested: cancelling it needs its claim) is
-- taken only while fewer than max_runs_per_key OTHER runs of its key hold
-- a slot: running ones, and pending or waiting ones with a live owner (a heartbeat
-- within the lease; NULL: never stale, as above).  One statement in a write
-- transaction: atomic across processes (SQLite has one writer at a time).
-- (owner, now, run_id, stale_before = now - lease, dead_owner)
UPDATE runs SET owner = ?1, heartbeat_at = ?2
WHERE run_id = ?3
  AND (owner IS NULL OR owner = ?1 OR owner = ?5
       OR (heartbeat_at IS NOT NULL AND heartbeat_at < ?4))
  AND (concurrency_key IS NULL OR owner IS ?1 OR cancel_requested
       OR NOT (status = 'pending' OR status = 'waiting')
       OR (SELECT count(*) FROM runs AS other
           WHERE other.concurrency_key = runs.concurrency_key AND other.id <> runs.id
             AND (other.status = 'pending' OR other.status = 'running'
                  OR other.status = 'waiting')
             AND (other.status = 'running'
                  OR (other.owner IS NOT NULL
                      AND (other.heartbeat_at IS NULL OR other.heartbeat_at >= ?4))))
          < coalesce(max_runs_per_key, 1));

-- heartbeat --
-- Refresh ownership when the owner still holds the run, and say whether it did, who
-- holds it and whether a cancel was requested; no row: no such run.  One statement
-- per poll of a driven run.  (now, run_id, owner)
UPDATE runs SET heartbeat_at = CASE WHEN owner = ?3 THEN ?1 ELSE heartbeat_at END
WHERE run_id = ?2
RETURNING owner IS ?3, owner, cancel_requested;

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
-- ------------------------------------------------------------------------------------
-- Claims (tickets and the outcome inbox; 0002_attempt_tickets.sql).  Every write below
-- runs inside a group commit's transaction, under the write lock: a read followed by
-- a write is a compare-and-set.  ``now`` is the store's time.time() in that
-- transaction.

-- insert_ticket --
-- Store an unclaimed ticket when its attempt is neither a ticket nor an inbox outcome
-- of the run already and the step exists; 0 rows: refused (see ticket_refusal).
-- (run, step_id, attempt, fallback, priority, pool, pool_limit, payload, created_at,
--  rate_count, rate_period)
INSERT INTO tickets (run, step_id, attempt, fallback, priority, pool, pool_limit,
                     payload, created_at, rate_count, rate_period)
SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11
WHERE EXISTS (SELECT 1 FROM steps WHERE run = ?1 AND step_id = ?2)
  AND NOT EXISTS (SELECT 1 FROM outcomes
                  WHERE run = ?1 AND step_id = ?2 AND attempt = ?3 AND fallback = ?4)
ON CONFLICT DO NOTHING;

-- delete_ticket --
-- Withdraw a ticket, claimed or not (absent: no effect).  (run, step_id, attempt,
-- fallback)
DELETE FROM tickets WHERE run = ? AND step_id = ? AND attempt = ? AND fallback = ?;

-- delete_outcome --
-- Consume an inbox outcome; 0 rows: it is not there (another driver applied it).
-- (run, step_id, attempt, fallback)
DELETE FROM outcomes WHERE run = ? AND step_id = ? AND attempt = ? AND fallback = ?;

-- tickets_to_claim --
-- Unclaimed tickets in claim order (through tickets_to_claim), read lazily: the claim
-- stops at its limit.  ()
SELECT rowid, pool, pool_limit, rate_count, rate_period
FROM tickets WHERE token IS NULL ORDER BY priority, rowid;

-- pool_window --
-- The claim times of a pool's rated tickets still inside a window, oldest first.
-- (pool, window start: times after it count)
SELECT at FROM pool_starts WHERE pool = ? AND at > ? ORDER BY at;

-- prune_pool_starts --
-- Forget a pool's claim times that fell out of its window.  (pool, window start)
DELETE FROM pool_starts WHERE pool = ? AND at <= ?;

-- insert_pool_start --
-- A rated ticket of a pool claimed.  (pool, at)
INSERT INTO pool_starts (pool, at) VALUES (?, ?);

-- pool_claimed --
-- How many tickets of a pool are claimed, in the whole store.  (pool)
SELECT count(*) FROM tickets WHERE pool = ? AND token IS NOT NULL;

-- take_ticket --
-- Claim one ticket found unclaimed in the same transaction.
-- (token, claimed_by, expires_at, rowid)
UPDATE tickets SET token = ?, claimed_by = ?, expires_at = ? WHERE rowid = ?;

-- taken_ticket --
-- What a worker needs of a ticket it claimed.  (rowid)
SELECT r.run_id, r.workflow, r.version, t.step_id, t.attempt, t.fallback, t.payload, t.run
FROM tickets AS t JOIN runs AS r ON r.id = t.run WHERE t.rowid = ?;

-- set_step_worker --
-- The step row names the worker that claimed its attempt.  (worker, run, step_id)
UPDATE steps SET worker = ? WHERE run = ? AND step_id = ?;

-- extend_leases --
-- Push the expiry of the leases a worker still holds.  (expires_at, worker,
-- tokens: a JSON array)
UPDATE tickets SET expires_at = ?1
WHERE claimed_by = ?2 AND token IN (SELECT value FROM json_each(?3));

-- held_tokens --
-- Which of these tokens the worker holds.  (worker, tokens: a JSON array)
SELECT token FROM tickets
WHERE claimed_by = ?1 AND token IN (SELECT value FROM json_each(?2));

-- complete_ticket --
-- Delete the ticket of an attempt only while this worker holds it with this token;
-- 1 row: the completion counts.  (run, step_id, attempt, fallback, token, worker)
DELETE FROM tickets
WHERE run = ? AND step_id = ? AND attempt = ? AND fallback = ? AND token = ?
  AND claimed_by = ?;

-- insert_outcome --
-- An attempt's outcome enters the inbox (its ticket was deleted in the same
-- transaction, so the key is free).
-- (run, step_id, attempt, fallback, kind, output, error, worker, at, logs)
INSERT INTO outcomes (run, step_id, attempt, fallback, kind, output, error, worker, at,
                      logs)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- expired_tickets --
-- Claimed tickets whose lease ran out, soonest expired first (through
-- tickets_by_expiry).  (now, limit)
SELECT t.rowid, r.run_id, t.run, t.step_id, t.attempt, t.fallback, t.claimed_by
FROM tickets AS t JOIN runs AS r ON r.id = t.run
WHERE t.token IS NOT NULL AND t.expires_at < ?
ORDER BY t.expires_at LIMIT ?;

-- delete_ticket_by_rowid --
-- Remove a reaped ticket.  (rowid)
DELETE FROM tickets WHERE rowid = ?;

-- get_outcomes --
-- A run's inbox in arrival order.  (run)
SELECT step_id, attempt, fallback, kind, output, error, worker, at, logs
FROM outcomes WHERE run = ? ORDER BY rowid;

-- get_tickets --
-- A run's tickets in the order they were stored.  (run)
SELECT step_id, attempt, fallback, priority, pool, pool_limit, payload, created_at,
       claimed_by, expires_at, rate_count, rate_period
FROM tickets WHERE run = ? ORDER BY rowid;

-- runs_to_drive --
-- Unfinished runs without a live driver, oldest first (through runs_unfinished):
-- no owner, or a heartbeat older than the lease; a waiting run only once its due time
-- (wake_at) has come; a pending run only while its concurrency key has a slot free
-- (claim_run's count), so runs held back by a full key never hide the runs behind
-- them.  (stale_before = now - lease, limit, now)
SELECT run_id FROM runs
WHERE (status = 'pending' OR status = 'running'
       OR (status = 'waiting' AND wake_at IS NOT NULL))
  AND (status <> 'waiting' OR wake_at <= ?3)
  AND (owner IS NULL OR heartbeat_at < ?1)
  AND (concurrency_key IS NULL OR status = 'running' OR cancel_requested
       OR (SELECT count(*) FROM runs AS other
           WHERE other.concurrency_key = runs.concurrency_key AND other.id <> runs.id
             AND (other.status = 'pending' OR other.status = 'running'
                  OR other.status = 'waiting')
             AND (other.status = 'running'
                  OR (other.owner IS NOT NULL
                      AND (other.heartbeat_at IS NULL OR other.heartbeat_at >= ?1))))
          < coalesce(max_runs_per_key, 1))
ORDER BY created_at, id LIMIT ?2;

-- ------------------------------------------------------------------------------------
-- Circuit breakers (0004_pool_rates_breakers.sql).

-- get_breaker --
-- A breaker's state and version.  (key)
SELECT state, version FROM breakers WHERE key = ?;

-- insert_breaker --
-- The first state of a breaker; 0 rows: one is stored already.  (key, state)
INSERT INTO breakers (key, state, version) VALUES (?, ?, 1) ON CONFLICT DO NOTHING;

-- update_breaker --
-- Compare-and-set; 0 rows: the stored version is not the one read.
-- (state, key, version read)
UPDATE breakers SET state = ?, version = version + 1 WHERE key = ? AND version = ?;

-- ------------------------------------------------------------------------------------
-- The step cache (0008_step_cache.sql).

-- get_cached --
-- The stored result of a key, if created at or after a time.
-- (workflow, step_id, key_hash, since)
SELECT output, run_id, created_at FROM step_cache
WHERE workflow = ? AND step_id = ? AND key_hash = ? AND created_at >= ?;

-- put_cached --
-- Store a result; of two for one key the newer stays.
-- (workflow, step_id, key_hash, output, run_id, created_at)
INSERT INTO step_cache (workflow, step_id, key_hash, output, run_id, created_at)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (workflow, step_id, key_hash) DO UPDATE
SET output = excluded.output, run_id = excluded.run_id, created_at = excluded.created_at
WHERE excluded.created_at >= step_cache.created_at;

-- ------------------------------------------------------------------------------------
-- Webhook deliveries (0009_hook_deliveries.sql).

-- forget_old_deliveries --
-- Delete the deliveries received before a time.  (before)
DELETE FROM hook_deliveries WHERE received_at < ?;

-- claim_delivery --
-- Record a delivery unless one is stored; either way, the run id stored.
-- (hook, delivery_id, run_id, received_at)
INSERT INTO hook_deliveries (hook, delivery_id, run_id, received_at) VALUES (?, ?, ?, ?)
ON CONFLICT (hook, delivery_id) DO UPDATE SET hook = excluded.hook
RETURNING run_id;

-- forget_delivery --
-- Delete a delivery that still names the run.  (hook, delivery_id, run_id)
DELETE FROM hook_deliveries WHERE hook = ? AND delivery_id = ? AND run_id = ?;

-- ------------------------------------------------------------------------------------
-- The step journal (0010_step_journal.sql).

-- journal_get --
-- The stored result of a journaled call.  (run_id, step_id, name)
SELECT j.value, j.attempt, j.at FROM step_journal AS j JOIN runs AS r ON j.run = r.id
WHERE r.run_id = ? AND j.step_id = ? AND j.name = ?;

-- journal_step --
-- The stored results of a step's journaled calls.  (run_id, step_id)
SELECT j.name, j.value, j.attempt, j.at FROM step_journal AS j JOIN runs AS r ON j.run = r.id
WHERE r.run_id = ? AND j.step_id = ?;

-- journal_put --
-- Store a result unless one is stored; either way, the stored row (the no-op update
-- returns it).  No row: no such run.  (step_id, name, value, attempt, at, run_id)
INSERT INTO step_journal (run, step_id, name, value, attempt, at)
SELECT id, ?, ?, ?, ?, ? FROM runs WHERE run_id = ?
ON CONFLICT (run, step_id, name) DO UPDATE SET name = excluded.name
RETURNING value, attempt, at;

-- journal_list --
-- A run's journal in the order stored.  No row: no such run; one row of NULLs: an
-- empty journal.  (run_id)
SELECT j.step_id, j.name, j.attempt, j.at
FROM runs AS r LEFT JOIN step_journal AS j ON j.run = r.id
WHERE r.run_id = ?
ORDER BY j.rowid;

-- Events sent to a run (0011_run_events.sql).

-- event_get --
-- The stored event of that name.  (run_id, name)
SELECT e.data, e.at FROM run_events AS e JOIN runs AS r ON e.run = r.id
WHERE r.run_id = ? AND e.name = ?;

-- event_put --
-- Store an event unless one of that name is stored.  No row: no such run, or one is
-- stored (event_get tells which).  (name, data, at, run_id)
INSERT INTO run_events (run, name, data, at)
SELECT id, ?, ?, ? FROM runs WHERE run_id = ?
ON CONFLICT (run, name) DO NOTHING
RETURNING data, at;

-- Tokens spent by model calls (0012_run_tokens.sql).

-- tokens_add_step --
-- Add one call's usage to its step's.  No row: no such run.
-- (prompt, completion, total, step_id, run_id)
INSERT INTO step_tokens (run, step_id, prompt, completion, total)
SELECT id, ?4, ?1, ?2, ?3 FROM runs WHERE run_id = ?5
ON CONFLICT (run, step_id) DO UPDATE SET prompt = step_tokens.prompt + excluded.prompt,
    completion = step_tokens.completion + excluded.completion,
    total = step_tokens.total + excluded.total
RETURNING run;

-- tokens_add --
-- Add to a run's count; the new count.  No row: no such run.  (tokens, run_id)
INSERT INTO run_tokens (run, tokens)
SELECT id, ? FROM runs WHERE run_id = ?
ON CONFLICT (run) DO UPDATE SET tokens = run_tokens.tokens + excluded.tokens
RETURNING tokens;

-- tokens_get --
-- The run's count (0: none counted).  No row: no such run.  (run_id)
SELECT coalesce(t.tokens, 0)
FROM runs AS r LEFT JOIN run_tokens AS t ON t.run = r.id
WHERE r.run_id = ?;
