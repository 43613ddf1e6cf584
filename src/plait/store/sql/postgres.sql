-- The PostgreSQL store's queries (plait.store.postgres), one named block each.
--
-- A block starts with a line ``-- name --``; the comment lines under it say what the
-- query does and list its parameters.  Parameters are named (``%(name)s``, bound by
-- psycopg on the server: nothing a user types is ever spliced into SQL) and cast where
-- the server could not tell their type (a NULL, an array).  JSON columns hold the exact
-- json.dumps text (type json), SQL NULL meaning JSON null; see
-- migrations/postgres/0001_initial.sql, which also holds the two functions that write a
-- run's changes (plait_write_batch, plait_record_decision).
--
-- Every Store method is one of these statements: one round trip, and (autocommit) one
-- transaction.
--
-- Array parameters are bound in binary (``%(name)b``): in text format psycopg quotes
-- every element of an array with a regular expression, which for the JSON texts of a
-- batch (a ticket's payload holds its parents' outputs) cost a driver more than the
-- rest of the batch together; in binary each element is sent as it is.

-- schema_version --
-- The schema version: the highest migration applied.  Fails with undefined_table on a
-- database plait never migrated (version 0).  ()
SELECT coalesce(max(version), 0) FROM plait_migrations;

-- schema_exists --
-- Whether the migrations table exists in the search path (inside the migration's
-- transaction, where an error would abort it).  ()
SELECT to_regclass('plait_migrations') IS NOT NULL;

-- taken_names --
-- Which of plait's table names exist already in the schema plait creates its tables
-- in (the first of the search path).  (names)
SELECT relname FROM pg_class
WHERE relnamespace = current_schema()::regnamespace AND relname = ANY (%(names)b::text[])
ORDER BY relname;

-- migration_lock --
-- The advisory lock every process migrating a database takes first (released at the
-- end of the migration's transaction), so a migration is applied once.  (key)
SELECT pg_advisory_xact_lock(%(key)s);

-- record_migration --
-- A migration was applied (inside its transaction).  (version, name)
INSERT INTO plait_migrations (version, name) VALUES (%(version)s, %(name)s);

-- get_workflow --
-- One stored version of a workflow, or its latest when version is NULL.
-- (name, version)
SELECT name, version, fingerprint, definition, created_at
FROM workflows
WHERE name = %(name)s AND (%(version)s::integer IS NULL OR version = %(version)s::integer)
ORDER BY version DESC LIMIT 1;

-- workflow_versions --
-- The stored versions of a workflow, ascending (to say which exist).  (name)
SELECT version FROM workflows WHERE name = %(name)s ORDER BY version;

-- workflow_by_fingerprint --
-- The highest stored version of a workflow with this fingerprint (a definition
-- stored already reuses its version).  (name, fingerprint)
SELECT name, version, fingerprint, definition, created_at
FROM workflows WHERE name = %(name)s AND fingerprint = %(fingerprint)s
ORDER BY version DESC LIMIT 1;

-- add_next_workflow --
-- Store a definition as the next version of its workflow unless a stored version has
-- its fingerprint already; returns the stored row either way.  No row: another
-- process stored that version number meanwhile (run it again).
-- (name, fingerprint, definition, created_at)
WITH same AS (
    SELECT name, version, fingerprint, definition, created_at FROM workflows
    WHERE name = %(name)s AND fingerprint = %(fingerprint)s
    ORDER BY version DESC LIMIT 1),
added AS (
    INSERT INTO workflows (name, version, fingerprint, definition, created_at)
    SELECT %(name)s, coalesce((SELECT max(version) FROM workflows
                               WHERE name = %(name)s), 0) + 1,
           %(fingerprint)s, %(definition)s::json, %(created_at)s
    WHERE NOT EXISTS (SELECT 1 FROM same)
    ON CONFLICT (name, version) DO NOTHING
    RETURNING name, version, fingerprint, definition, created_at)
SELECT name, version, fingerprint, definition, created_at FROM added
UNION ALL
SELECT name, version, fingerprint, definition, created_at FROM same;

-- add_workflow_version --
-- Store a definition as the given version unless that version is stored; returns the
-- stored row either way (the caller compares fingerprints).  No row: another process
-- stored that version meanwhile (run it again).
-- (name, version, fingerprint, definition, created_at)
WITH added AS (
    INSERT INTO workflows (name, version, fingerprint, definition, created_at)
    VALUES (%(name)s, %(version)s, %(fingerprint)s, %(definition)s::json, %(created_at)s)
    ON CONFLICT (name, version) DO NOTHING
    RETURNING name, version, fingerprint, definition, created_at)
SELECT name, version, fingerprint, definition, created_at FROM added
UNION ALL
SELECT name, version, fingerprint, definition, created_at FROM workflows
WHERE name = %(name)s AND version = %(version)s;

-- list_workflows --
-- Every version of every workflow: names in the order they were first stored,
-- versions ascending (the memory store's order).  ()
SELECT name, version, fingerprint, definition, created_at
FROM workflows
ORDER BY min(id) OVER (PARTITION BY name), version;

-- create_run --
-- A new run with every step pending (in definition order) and its creation event
-- (seq 1), in one statement; changes nothing when a run with that public id exists
-- (0 rows changed: the caller says so).  owner_seen_at is the database's time of the
-- heartbeat given, if any (now() shifted, see claim_run).
-- (run_id, workflow, version, fingerprint, status, input, output, error, created_at,
--  started_at, finished_at, retry_of, parent_run_id, sla, cancel_requested, owner,
--  heartbeat_at, shift, step_ids, concurrency_key, max_runs_per_key)
WITH run AS (
    INSERT INTO runs (run_id, workflow, version, fingerprint, status, input, output,
                      error, created_at, started_at, finished_at, retry_of,
                      parent_run_id, sla, cancel_requested, owner, heartbeat_at,
                      owner_seen_at, last_seq, concurrency_key, max_runs_per_key)
    VALUES (%(run_id)s, %(workflow)s, %(version)s, %(fingerprint)s, %(status)s,
            %(input)s::json, %(output)s::json, %(error)s, %(created_at)s,
            %(started_at)s, %(finished_at)s, %(retry_of)s, %(parent_run_id)s, %(sla)s,
            %(cancel_requested)s, %(owner)s, %(heartbeat_at)s,
            now() + make_interval(secs => %(shift)s::double precision), 1,
            %(concurrency_key)s, %(max_runs_per_key)s)
    ON CONFLICT (run_id) DO NOTHING
    RETURNING id),
steps AS (
    INSERT INTO steps (run, step_id, position, status)
    SELECT run.id, s.step_id, s.position - 1, 'pending'
    FROM run, unnest(%(step_ids)b::text[]) WITH ORDINALITY AS s (step_id, position))
INSERT INTO events (run, seq, at, kind, target)
SELECT id, 1, %(created_at)s, 'run', %(status)s FROM run;

-- insert_new_steps --
-- The steps a batch adds to its run (a map's items), pending, in the transaction that
-- then calls plait_write_batch.  A unique violation: another driver added them.
-- (run_id, step_ids, positions)
INSERT INTO steps (run, step_id, position, status)
SELECT r.id, s.step_id, s.position, 'pending'
FROM runs AS r, unnest(%(step_ids)b::text[], %(positions)b::integer[]) AS s (step_id, position)
WHERE r.run_id = %(run_id)s;

-- write_batch --
-- Store one batch of a run's changes, its claims lists included, given as one jsonb
-- document (postgres_rows.write_params): see plait_write_batch in migration 0011
-- (raises PL001 for an unknown run, PL002 for a batch that does not apply, PL003-PL005
-- for claims lists that do not, PL006 when the run is not the batch's owner's).
-- (batch)
SELECT plait_write_batch(%(batch)s::jsonb);

-- stored_statuses --
-- The stored status of a run and of some of its steps (to explain a refused batch):
-- one row per step found, the step NULL when none is.  No row: no such run.
-- (run_id, steps)
SELECT r.status, s.step_id, s.status
FROM runs AS r
LEFT JOIN steps AS s ON s.run = r.id AND s.step_id = ANY (%(steps)b::text[])
WHERE r.run_id = %(run_id)s;

-- get_run --
-- Everything about one run.  (run_id)
SELECT run_id, workflow, version, fingerprint, status, input, output, error, created_at,
       started_at, finished_at, retry_of, parent_run_id, sla, cancel_requested, owner,
       heartbeat_at, concurrency_key, max_runs_per_key, wake_at
FROM runs WHERE run_id = %(run_id)s;

-- list_runs --
-- Runs newest first, optionally of one status and created since a time (a filter is
-- ignored when its parameter is NULL), and only those without a parent when top_level
-- is true; ties keep the order the runs were created in.
-- Walks runs_by_created and stops at the limit.  (status, since, before, limit,
-- top_level)
SELECT run_id, workflow, version, fingerprint, status, input, output, error, created_at,
       started_at, finished_at, retry_of, parent_run_id, sla, cancel_requested, owner,
       heartbeat_at, concurrency_key, max_runs_per_key, wake_at
FROM runs
WHERE (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(since)s::double precision IS NULL OR created_at >= %(since)s::double precision)
  AND (%(before)s::double precision IS NULL OR created_at <= %(before)s::double precision)
  AND (NOT %(top_level)s::boolean OR parent_run_id IS NULL)
ORDER BY created_at DESC, id
LIMIT %(limit)s;

-- list_workflow_runs --
-- The same for the runs of one workflow, through runs_by_workflow.
-- (workflow, status, since, before, limit, top_level)
SELECT run_id, workflow, version, fingerprint, status, input, output, error, created_at,
       started_at, finished_at, retry_of, parent_run_id, sla, cancel_requested, owner,
       heartbeat_at, concurrency_key, max_runs_per_key, wake_at
FROM runs
WHERE workflow = %(workflow)s
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(since)s::double precision IS NULL OR created_at >= %(since)s::double precision)
  AND (%(before)s::double precision IS NULL OR created_at <= %(before)s::double precision)
  AND (NOT %(top_level)s::boolean OR parent_run_id IS NULL)
ORDER BY created_at DESC, id
LIMIT %(limit)s;

-- read_run --
-- A run and everything its document shows, in one statement: the run's columns as
-- get_run gives them, then its steps (definition order), attempts (start order),
-- history (in order) and journal (stored order), each as one array per column of
-- get_steps, get_attempts, get_events and journal_list (NULL: none), then its
-- workflow's columns as get_workflow gives them (NULLs: that version is not stored).
-- No row: no such run.  (run_id)
SELECT r.run_id, r.workflow, r.version, r.fingerprint, r.status, r.input, r.output,
       r.error, r.created_at, r.started_at, r.finished_at, r.retry_of, r.parent_run_id,
       r.sla, r.cancel_requested, r.owner, r.heartbeat_at, r.concurrency_key,
       r.max_runs_per_key, r.wake_at, s.*, a.*, e.*, j.*,
       w.name, w.version, w.fingerprint, w.definition, w.created_at
FROM runs AS r
LEFT JOIN workflows AS w ON w.name = r.workflow AND w.version = r.version
CROSS JOIN LATERAL (
    SELECT array_agg(step_id ORDER BY position), array_agg(status ORDER BY position),
           array_agg(attempts ORDER BY position),
           array_agg(output::text ORDER BY position),
           array_agg(error ORDER BY position), array_agg(started_at ORDER BY position),
           array_agg(finished_at ORDER BY position),
           array_agg(skip_reason ORDER BY position),
           array_agg(fallback_used ORDER BY position),
           array_agg(next_attempt_at ORDER BY position),
           array_agg(worker ORDER BY position)
    FROM steps WHERE run = r.id) AS s
CROSS JOIN LATERAL (
    SELECT array_agg(step_id ORDER BY started_at, start_seq),
           array_agg(attempt ORDER BY started_at, start_seq),
           array_agg(fallback ORDER BY started_at, start_seq),
           array_agg(status ORDER BY started_at, start_seq),
           array_agg(started_at ORDER BY started_at, start_seq),
           array_agg(finished_at ORDER BY started_at, start_seq),
           array_agg(error ORDER BY started_at, start_seq),
           array_agg(worker ORDER BY started_at, start_seq)
    FROM attempts WHERE run = r.id) AS a
CROSS JOIN LATERAL (
    SELECT array_agg(seq ORDER BY seq), array_agg(at ORDER BY seq),
           array_agg(kind ORDER BY seq), array_agg(step_id ORDER BY seq),
           array_agg(source ORDER BY seq), array_agg(target ORDER BY seq),
           array_agg(attempt ORDER BY seq), array_agg(data::text ORDER BY seq)
    FROM events WHERE run = r.id) AS e
CROSS JOIN LATERAL (
    SELECT array_agg(step_id ORDER BY id), array_agg(name ORDER BY id),
           array_agg(attempt ORDER BY id), array_agg(at ORDER BY id)
    FROM step_journal WHERE run = r.id) AS j
WHERE r.run_id = %(run_id)s;

-- get_steps --
-- A run's steps in definition order.  No row: no such run; one row of NULLs: a run
-- without steps.  (run_id)
SELECT s.step_id, s.status, s.attempts, s.output, s.error, s.started_at, s.finished_at,
       s.skip_reason, s.fallback_used, s.next_attempt_at, s.worker
FROM runs AS r LEFT JOIN steps AS s ON s.run = r.id
WHERE r.run_id = %(run_id)s
ORDER BY s.position;

-- get_steps_by_id --
-- The named steps of a run in definition order.  No row: no such run; one row of
-- NULLs: none of them is a step of the run.  (run_id, step_ids)
SELECT s.step_id, s.status, s.attempts, s.output, s.error, s.started_at, s.finished_at,
       s.skip_reason, s.fallback_used, s.next_attempt_at, s.worker
FROM runs AS r LEFT JOIN steps AS s ON s.run = r.id AND s.step_id = ANY(%(step_ids)s)
WHERE r.run_id = %(run_id)s
ORDER BY s.position;

-- get_attempts --
-- A run's attempts by start time; ties keep the order they were stored in.  No row:
-- no such run; one row of NULLs: a run without attempts.  (run_id)
SELECT a.step_id, a.attempt, a.fallback, a.status, a.started_at, a.finished_at, a.error,
       a.worker
FROM runs AS r LEFT JOIN attempts AS a ON a.run = r.id
WHERE r.run_id = %(run_id)s
ORDER BY a.started_at, a.start_seq;

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
            WHERE w.run = p.id AND w.kind = 'note' AND w.data -> 'wait' IS NOT NULL
            GROUP BY w.step_id) AS latest
      JOIN steps AS s ON s.run = p.id AND s.step_id = latest.step_id
      JOIN events AS e ON e.run = p.id AND e.seq = latest.seq
      JOIN runs AS c ON c.run_id = e.data -> 'wait' ->> 'child_run_id'
      WHERE s.status = 'waiting' AND e.data -> 'wait' ->> 'kind' = 'child'
        AND c.status IN ('completed', 'failed', 'cancelled'))
ORDER BY p.created_at, p.id LIMIT %(limit)s;

-- get_events --
-- A run's history after a given seq, in order.  No row: no such run; one row of
-- NULLs: nothing after that seq.  (run_id, after)
SELECT e.seq, e.at, e.kind, e.step_id, e.source, e.target, e.attempt, e.data
FROM runs AS r LEFT JOIN events AS e ON e.run = r.id AND e.seq > %(after)s
WHERE r.run_id = %(run_id)s
ORDER BY e.seq;

-- record_decision --
-- A person's decision on an approval step, as one compare-and-set: see
-- plait_record_decision in the migration.  (run_id, step_id, at, data)
SELECT outcome, detail
FROM plait_record_decision(%(run_id)s, %(step_id)s, %(at)s, %(data)s::json);

-- request_cancel --
-- Flag a run for cancellation (not a transition: the status is unchanged).  (run_id)
UPDATE runs SET cancel_requested = true WHERE run_id = %(run_id)s;

-- claim_run --
-- Take a run when it has no owner, is already this owner's, is still held by the
-- owner known to be dead (NULL: none), or its owner's last heartbeat is older than the
-- lease on the DATABASE's clock.  The caller's time is ``now() + shift`` (shift: how
-- far the caller's ``now`` is from its own present, see PostgresStore.claim_run).
-- A pending or waiting run with a concurrency key is taken only while its key has a
-- slot free (plait_key_admits, migration 0005, under the key's advisory lock), unless
-- its cancel was requested (cancelling it needs the claim; it starts no step).
-- Returns whether the run exists and, when taken, the run.  One statement: atomic
-- across processes.  (owner, now, shift, run_id, lease, dead_owner)
WITH claimed AS (
    UPDATE runs
    SET owner = %(owner)s, heartbeat_at = %(now)s,
        owner_seen_at = now() + make_interval(secs => %(shift)s)
    WHERE run_id = %(run_id)s
      AND (owner IS NULL OR owner = %(owner)s OR owner = %(dead_owner)s
           OR owner_seen_at < now() + make_interval(secs => %(shift)s - %(lease)s))
      AND (cancel_requested  -- cancelling a held-back run needs its claim
           OR plait_key_admits(id, concurrency_key, max_runs_per_key, status, owner,
                               %(owner)s::text, %(lease)s::double precision,
                               %(shift)s::double precision))
    RETURNING run_id, workflow, version, fingerprint, status, input, output, error,
              created_at, started_at, finished_at, retry_of, parent_run_id, sla,
              cancel_requested, owner, heartbeat_at, concurrency_key, max_runs_per_key,
              wake_at)
SELECT EXISTS (SELECT FROM runs WHERE run_id = %(run_id)s), claimed.*
FROM (SELECT) AS one LEFT JOIN claimed ON true;

-- heartbeat --
-- Refresh ownership on both clocks when the owner still holds the run; returns whether
-- it did, who holds the run and whether a cancel was requested (no row: no such run).
-- One statement per poll of a driven run.  (now, shift, run_id, owner)
WITH beat AS (
    UPDATE runs
    SET heartbeat_at = %(now)s, owner_seen_at = now() + make_interval(secs => %(shift)s)
    WHERE run_id = %(run_id)s AND owner = %(owner)s
    RETURNING cancel_requested)
SELECT EXISTS (SELECT FROM beat), r.owner,
       coalesce((SELECT cancel_requested FROM beat), r.cancel_requested)
FROM runs AS r WHERE r.run_id = %(run_id)s;

-- release_run --
-- Give up ownership; no effect unless the owner holds the run.  (run_id, owner)
UPDATE runs SET owner = NULL WHERE run_id = %(run_id)s AND owner = %(owner)s;

-- claim_fire --
-- Record one fire of a schedule and create its run (as create_run, plus the note
-- {"schedule": ...} at seq 2), in one statement; nothing when the fire is recorded
-- already (returns false).  A run id that exists violates runs_run_id_key, and the
-- whole statement (the fire included) is undone.
-- (create_run's parameters, schedule, fire_time, note)
WITH fire AS (
    INSERT INTO schedule_fires (workflow, schedule, fire_time, run_id)
    VALUES (%(workflow)s, %(schedule)s, %(fire_time)s, %(run_id)s)
    ON CONFLICT (workflow, schedule, fire_time) DO NOTHING
    RETURNING run_id),
run AS (
    INSERT INTO runs (run_id, workflow, version, fingerprint, status, input, output,
                      error, created_at, started_at, finished_at, retry_of,
                      parent_run_id, sla, cancel_requested, owner, heartbeat_at,
                      owner_seen_at, last_seq, concurrency_key, max_runs_per_key)
    SELECT %(run_id)s, %(workflow)s, %(version)s, %(fingerprint)s, %(status)s,
           %(input)s::json, %(output)s::json, %(error)s, %(created_at)s,
           %(started_at)s, %(finished_at)s, %(retry_of)s, %(parent_run_id)s, %(sla)s,
           %(cancel_requested)s, %(owner)s, %(heartbeat_at)s,
           now() + make_interval(secs => %(shift)s::double precision), 2,
           %(concurrency_key)s, %(max_runs_per_key)s
    FROM fire
    RETURNING id),
steps AS (
    INSERT INTO steps (run, step_id, position, status)
    SELECT run.id, s.step_id, s.position - 1, 'pending'
    FROM run, unnest(%(step_ids)b::text[]) WITH ORDINALITY AS s (step_id, position)),
history AS (
    INSERT INTO events (run, seq, at, kind, target, data)
    SELECT id, 1, %(created_at)s, 'run', %(status)s, NULL FROM run
    UNION ALL
    SELECT id, 2, %(created_at)s, 'note', NULL, %(note)s::json FROM run)
SELECT EXISTS (SELECT FROM fire);

-- last_fire --
-- The latest of a schedule's fire times and its first sighting (NULL: neither).
-- (workflow, schedule)
SELECT greatest(
    (SELECT max(fire_time) FROM schedule_fires
     WHERE workflow = %(workflow)s AND schedule = %(schedule)s),
    (SELECT first_seen FROM schedule_sightings
     WHERE workflow = %(workflow)s AND schedule = %(schedule)s));

-- record_sighting --
-- A schedule's first sighting; no effect when one is recorded.  Returns whether this
-- statement recorded it.  (workflow, schedule, first_seen)
INSERT INTO schedule_sightings (workflow, schedule, first_seen)
VALUES (%(workflow)s, %(schedule)s, %(first_seen)s)
ON CONFLICT (workflow, schedule) DO NOTHING;

-- claim_attempts --
-- Claim up to ``limit`` tickets for ``worker`` with a lease of ``lease`` seconds on the
-- database's clock: see plait_claim_attempts in migration 0003 (pool admission under
-- advisory locks).  Rows in no order: sort by (priority, stored).  (worker, limit, lease)
SELECT run_id, workflow, version, step_id, attempt, fallback, token, payload, expires_at,
       priority, stored
FROM plait_claim_attempts(%(worker)s, %(limit)s::integer, %(lease)s::double precision);

-- extend_leases --
-- Push the expiry of the worker's tickets with these tokens to the database's time +
-- lease; returns the tokens still held.  (lease, worker, tokens)
UPDATE tickets
SET expires_at = clock_timestamp() + make_interval(secs => %(lease)s::double precision)
WHERE claimed_by = %(worker)s AND token = ANY (%(tokens)b::text[])
RETURNING token;

-- complete_attempts --
-- Store completed attempts' outcomes, or notes of the discarded ones: see
-- plait_complete_attempts in migration 0006.  Returns one boolean per item.
-- (worker, run_ids, steps, attempts, fallbacks, tokens, kinds, outputs, errors, at,
--  notes, noted, logs)
SELECT plait_complete_attempts(
    %(worker)s, %(run_ids)b::text[], %(steps)b::text[], %(attempts)b::integer[],
    %(fallbacks)b::boolean[], %(tokens)b::text[], %(kinds)b::text[], %(outputs)b::json[],
    %(errors)b::json[], %(at)b::double precision[], %(notes)b::json[],
    %(noted)s::double precision, %(logs)b::json[]);

-- reap_expired --
-- Turn expired leases into interrupted outcomes, each once however many reapers run:
-- see plait_reap_expired in migration 0003.  (limit, error, marks)
SELECT run_id, step_id, attempt
FROM plait_reap_expired(%(limit)s::integer, %(error)s, %(marks)b::text[]);

-- get_outcomes --
-- A run's inbox in arrival order.  No row: no such run; one row of NULLs: an empty
-- inbox.  (run_id)
SELECT o.step_id, o.attempt, o.fallback, o.kind, o.output, o.error, o.worker, o.at,
       o.logs
FROM runs AS r LEFT JOIN outcomes AS o ON o.run = r.id
WHERE r.run_id = %(run_id)s
ORDER BY o.id;

-- get_tickets --
-- A run's tickets in the order they were stored, times as seconds since the epoch on
-- the database's clock.  No row: no such run; one row of NULLs: no ticket.  (run_id)
SELECT t.step_id, t.attempt, t.fallback, t.priority, t.pool, t.pool_limit, t.payload,
       extract(epoch FROM t.created_at)::double precision, t.claimed_by,
       extract(epoch FROM t.expires_at)::double precision, t.rate_count, t.rate_period
FROM runs AS r LEFT JOIN tickets AS t ON t.run = r.id
WHERE r.run_id = %(run_id)s
ORDER BY t.id;

-- runs_to_drive --
-- Pending or running runs without a live driver, oldest first (through
-- runs_unfinished): no owner, or an owner whose last heartbeat, as the database saw it
-- (owner_seen_at, see claim_run), is older than the lease; and waiting runs whose due
-- time (wake_at, epoch seconds) has come on the database's clock.  (lease, limit)
-- A pending run is listed only while its concurrency key has a slot free (the count
-- of plait_key_admits, without its lock: claim_run decides), so runs held back by a
-- full key never hide the runs behind them.
SELECT run_id FROM runs
WHERE (status IN ('pending', 'running') OR (status = 'waiting' AND wake_at IS NOT NULL))
  AND (status <> 'waiting' OR wake_at <= extract(epoch FROM now()))
  AND (owner IS NULL
       OR owner_seen_at < now() - make_interval(secs => %(lease)s::double precision))
  AND (concurrency_key IS NULL OR status = 'running' OR cancel_requested
       OR (SELECT count(*) FROM runs AS other
           WHERE other.concurrency_key = runs.concurrency_key AND other.id <> runs.id
             AND other.status IN ('pending', 'running', 'waiting')
             AND (other.status = 'running'
                  OR (other.owner IS NOT NULL
                      AND (other.owner_seen_at IS NULL
                           OR other.owner_seen_at >= now() - make_interval(
                               secs => %(lease)s::double precision)))))
          < coalesce(max_runs_per_key, 1))
ORDER BY created_at, id
LIMIT %(limit)s;

-- ------------------------------------------------------------------------------------
-- Circuit breakers (0004_pool_rates_breakers.sql).

-- get_breaker --
-- A breaker's state and version.  (key)
SELECT state, version FROM breakers WHERE key = %(key)s;

-- insert_breaker --
-- The first state of a breaker; no row returned: one is stored already.  (key, state)
INSERT INTO breakers (key, state, version) VALUES (%(key)s, %(state)s::json, 1)
ON CONFLICT DO NOTHING
RETURNING version;

-- update_breaker --
-- Compare-and-set; no row returned: the stored version is not the one read.
-- (key, state, version)
UPDATE breakers SET state = %(state)s::json, version = version + 1
WHERE key = %(key)s AND version = %(version)s
RETURNING version;

-- ------------------------------------------------------------------------------------
-- The step cache (0008_step_cache.sql).

-- get_cached --
-- The stored result of a key, if created at or after a time.
-- (workflow, step_id, key_hash, since)
SELECT output, run_id, created_at FROM step_cache
WHERE workflow = %(workflow)s AND step_id = %(step_id)s AND key_hash = %(key_hash)s
  AND created_at >= %(since)s;

-- put_cached --
-- Store a result; of two for one key the newer stays.
-- (workflow, step_id, key_hash, output, run_id, created_at)
INSERT INTO step_cache (workflow, step_id, key_hash, output, run_id, created_at)
VALUES (%(workflow)s, %(step_id)s, %(key_hash)s, %(output)s::json, %(run_id)s,
        %(created_at)s)
ON CONFLICT (workflow, step_id, key_hash) DO UPDATE
SET output = excluded.output, run_id = excluded.run_id, created_at = excluded.created_at
WHERE excluded.created_at >= step_cache.created_at;

-- ------------------------------------------------------------------------------------
-- Webhook deliveries (0010_hook_deliveries.sql).

-- forget_old_deliveries --
-- Delete the deliveries received before a time.  (before)
DELETE FROM hook_deliveries WHERE received_at < %(before)s;

-- claim_delivery --
-- Record a delivery unless one is stored; either way, the run id stored (the no-op
-- update locks and returns the stored row, also against a concurrent insert).
-- (hook, delivery_id, run_id, received_at)
INSERT INTO hook_deliveries (hook, delivery_id, run_id, received_at)
VALUES (%(hook)s, %(delivery_id)s, %(run_id)s, %(received_at)s)
ON CONFLICT (hook, delivery_id) DO UPDATE SET hook = excluded.hook
RETURNING run_id;

-- forget_delivery --
-- Delete a delivery that still names the run.  (hook, delivery_id, run_id)
DELETE FROM hook_deliveries
WHERE hook = %(hook)s AND delivery_id = %(delivery_id)s AND run_id = %(run_id)s;

-- ------------------------------------------------------------------------------------
-- The step journal (0012_step_journal.sql).

-- journal_get --
-- The stored result of a journaled call.  (run_id, step_id, name)
SELECT j.value, j.attempt, j.at FROM step_journal AS j JOIN runs AS r ON j.run = r.id
WHERE r.run_id = %(run_id)s AND j.step_id = %(step_id)s AND j.name = %(name)s;

-- journal_step --
-- The stored results of a step's journaled calls.  (run_id, step_id)
SELECT j.name, j.value, j.attempt, j.at FROM step_journal AS j JOIN runs AS r ON j.run = r.id
WHERE r.run_id = %(run_id)s AND j.step_id = %(step_id)s;

-- journal_put --
-- Store a result unless one is stored; either way, the stored row (the no-op update
-- locks and returns it, also against a concurrent insert).  No row: no such run.
-- (run_id, step_id, name, value, attempt, at)
INSERT INTO step_journal (run, step_id, name, value, attempt, at)
SELECT id, %(step_id)s, %(name)s, %(value)s::json, %(attempt)s, %(at)s
FROM runs WHERE run_id = %(run_id)s
ON CONFLICT (run, step_id, name) DO UPDATE SET name = excluded.name
RETURNING value, attempt, at;

-- journal_list --
-- A run's journal in the order stored.  No row: no such run; one row of NULLs: an
-- empty journal.  (run_id)
SELECT j.step_id, j.name, j.attempt, j.at
FROM runs AS r LEFT JOIN step_journal AS j ON j.run = r.id
WHERE r.run_id = %(run_id)s
ORDER BY j.id;

-- Events sent to a run (0013_run_events.sql).

-- event_get --
-- The stored event of that name.  (run_id, name)
SELECT e.data, e.at FROM run_events AS e JOIN runs AS r ON e.run = r.id
WHERE r.run_id = %(run_id)s AND e.name = %(name)s;

-- event_put --
-- Store an event unless one of that name is stored (a concurrent insert is waited
-- for).  No row: no such run, or one is stored (event_get tells which).
-- (run_id, name, data, at)
INSERT INTO run_events (run, name, data, at)
SELECT id, %(name)s, %(data)s::json, %(at)s FROM runs WHERE run_id = %(run_id)s
ON CONFLICT (run, name) DO NOTHING
RETURNING data, at;

-- Tokens spent by model calls (0014_run_tokens.sql).

-- tokens_add --
-- One statement (one transaction; concurrent adds of any worker all count): add one
-- call's usage to its step's and its total to the count of the run and of each of
-- its ancestors still stored; the run's new count.  No row: no such run.
-- (run_id, step_id, prompt, completion, total, ancestors)
WITH step AS (
    INSERT INTO step_tokens (run, step_id, prompt, completion, total)
    SELECT id, %(step_id)s, %(prompt)s, %(completion)s, %(total)s
    FROM runs WHERE run_id = %(run_id)s
    ON CONFLICT (run, step_id) DO UPDATE SET prompt = step_tokens.prompt + excluded.prompt,
        completion = step_tokens.completion + excluded.completion,
        total = step_tokens.total + excluded.total
    RETURNING run
), counted AS (
    INSERT INTO run_tokens (run, tokens)
    SELECT r.id, %(total)s FROM runs AS r
    WHERE r.id IN (SELECT run FROM step)
       OR (r.run_id = ANY (%(ancestors)s::text[]) AND EXISTS (SELECT 1 FROM step))
    ON CONFLICT (run) DO UPDATE SET tokens = run_tokens.tokens + excluded.tokens
    RETURNING run, tokens
)
SELECT c.tokens FROM counted AS c JOIN step AS s ON s.run = c.run;

-- tokens_get --
-- The run's count (0: none counted).  No row: no such run.  (run_id)
SELECT coalesce(t.tokens, 0)
FROM runs AS r LEFT JOIN run_tokens AS t ON t.run = r.id
WHERE r.run_id = %(run_id)s;
