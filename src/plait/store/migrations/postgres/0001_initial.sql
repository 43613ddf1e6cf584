-- 0001_initial: workflows, runs, steps, attempts and the event history, and the two
-- functions that write a run's changes in one round trip.
--
-- Applied by plait.store.sql.postgres_schema in ONE transaction holding an advisory
-- lock, so processes opening a new database at once apply it once; the version reached
-- is recorded in plait_migrations.
--
-- Conventions of every plait PostgreSQL table (the same as SQLite's):
--   * JSON values are ``json``: the exact text written by json.dumps, validated by the
--     server but never rewritten (``jsonb`` would reorder keys, drop duplicates, turn
--     -0.0 into 0 and 1e308 into an integer, and refuse "\u0000").  SQL NULL means
--     JSON null.  Cast to jsonb to query them: ``output::jsonb -> 'key'``.
--   * Times written by plait are double precision seconds since the epoch, exactly as
--     the caller gave them; times judged by the database (leases) are timestamptz.
--   * Statuses are the lower-case names of plait.core.states (text).
--   * Child tables refer to a run by its integer key ``runs.id``; the public id
--     (``runs.run_id``) appears once, in ``runs``.
--   * Every writer of a run's steps, attempts or events first locks the run's row:
--     writers of one run take turns, writers of different runs never wait for each
--     other, and no two writers can deadlock on one run.

-- The schema version: one row per migration applied (the highest is the version).
CREATE TABLE plait_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- Every stored version of every definition; name + version never changes.
-- ``id`` orders names by when they were first stored (list_workflows).
CREATE TABLE workflows (
    id          bigint           GENERATED ALWAYS AS IDENTITY UNIQUE,
    name        text             NOT NULL,
    version     integer          NOT NULL,
    fingerprint text             NOT NULL,
    definition  json             NOT NULL,
    created_at  double precision NOT NULL,
    PRIMARY KEY (name, version)
);

-- Updated in place (status, owner, heartbeats): room on each page keeps those updates
-- HOT (no index write) since no indexed column changes.
CREATE TABLE runs (
    id               bigint           GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id           text             NOT NULL UNIQUE,
    workflow         text             NOT NULL,
    version          integer          NOT NULL,
    fingerprint      text             NOT NULL,
    status           text             NOT NULL CHECK (status IN
                         ('pending', 'running', 'waiting', 'completed', 'failed',
                          'cancelled')),
    input            json,
    output           json,
    error            text,
    created_at       double precision NOT NULL,
    started_at       double precision,
    finished_at      double precision,
    retry_of         text,             -- public id of the run this one retried
    parent_run_id    text,             -- public id of the run whose step started it
    sla              double precision,
    cancel_requested boolean          NOT NULL DEFAULT false,
    owner            text,             -- the process executing the run (claim_run)
    heartbeat_at     double precision, -- its last heartbeat, on its own clock
    owner_seen_at    timestamptz,      -- the same heartbeat on the database's clock:
                                       -- leases are judged on this one (now())
    last_seq         bigint           NOT NULL DEFAULT 0  -- seq of the latest event
) WITH (fillfactor = 80);

-- list_runs walks one of these newest first and stops at the limit; id breaks ties
-- (the order runs were created in, like the memory store's stable sort).
CREATE INDEX runs_by_created ON runs (created_at DESC, id);
CREATE INDEX runs_by_workflow ON runs (workflow, created_at DESC, id);

-- One row per step of a run, updated in place; ``position`` is definition order.
CREATE TABLE steps (
    run             bigint           NOT NULL REFERENCES runs (id),
    step_id         text             NOT NULL,
    position        integer          NOT NULL,
    status          text             NOT NULL CHECK (status IN
                        ('pending', 'queued', 'running', 'waiting', 'completed',
                         'failed', 'skipped', 'upstream_failed', 'cancelled')),
    attempts        integer          NOT NULL DEFAULT 0,
    output          json,
    error           text,
    started_at      double precision,
    finished_at     double precision,
    skip_reason     text,
    fallback_used   boolean          NOT NULL DEFAULT false,
    next_attempt_at double precision,
    worker          text,
    PRIMARY KEY (run, step_id)
) WITH (fillfactor = 80);

-- One row per attempt (and per fallback attempt) of a step, keyed like AttemptChange.
-- ``start_seq`` is the seq of the event that started it: it orders attempts that
-- started at the same time in the order they were stored.
CREATE TABLE attempts (
    run         bigint           NOT NULL REFERENCES runs (id),
    step_id     text             NOT NULL,
    attempt     integer          NOT NULL,
    fallback    boolean          NOT NULL,
    status      text             NOT NULL,  -- running | completed | failed | cancelled
    started_at  double precision NOT NULL,
    finished_at double precision,
    error       text,
    worker      text,
    start_seq   bigint           NOT NULL,
    PRIMARY KEY (run, step_id, attempt, fallback)
);

-- The append-only history of each run.  ``seq`` numbers a run's events from 1 without
-- gaps, in commit order (taken from runs.last_seq under the run's row lock), so a
-- reader that remembers the last seq it saw never misses or repeats an event.
--   kind 'step' and 'run': source -> target (source NULL for a run's creation);
--   kind 'attempt':        attempt number and its status in ``target``;
--   kind 'note':           ``data`` (JSON object).
CREATE TABLE events (
    run     bigint           NOT NULL REFERENCES runs (id),
    seq     bigint           NOT NULL,
    at      double precision NOT NULL,
    kind    text             NOT NULL CHECK (kind IN ('step', 'attempt', 'run', 'note')),
    step_id text,
    source  text,
    target  text,
    attempt integer,
    data    json,
    PRIMARY KEY (run, seq)
);

-- Store one batch of a run's changes (Store.write), atomically, in one round trip.
--
-- The arrays of a group are parallel (element i of each describes one item):
--   p_steps..p_worker:      each changed step's row after the batch, ONE per step,
--                           written only if the step still has status p_expected;
--   p_a_*:                  each attempt started or ended, ONE per attempt key:
--                           inserted (started_at, worker, start_seq from its first
--                           change) or, when stored already, its status, finished_at
--                           (coalesce(p_a_finished_at, p_a_started_at)) and error set;
--                           p_a_event is the position in p_e_* of its first event;
--   p_e_*:                  the events, in order, numbered after the run's last seq.
-- p_run_target NULL leaves the run alone; otherwise the run moves from p_run_source
-- (finished with output and error when p_run_final).
--
-- Raises SQLSTATE PL001 for an unknown run and PL002 when the batch does not apply to
-- the stored state (a step or the run not in the status the change moves it from, or a
-- step the run does not have); nothing is then stored.  The client explains PL002 by
-- reading the stored state; the transition table is checked by the client before.
CREATE FUNCTION plait_write_batch(
    p_run_id text,
    p_run_source text, p_run_target text, p_run_at double precision,
    p_run_final boolean, p_run_output json, p_run_error text,
    p_steps text[], p_expected text[], p_status text[], p_attempts integer[],
    p_output json[], p_error text[], p_started_at double precision[],
    p_finished_at double precision[], p_skip_reason text[], p_fallback_used boolean[],
    p_next_attempt_at double precision[], p_worker text[],
    p_a_step text[], p_a_attempt integer[], p_a_fallback boolean[], p_a_status text[],
    p_a_started_at double precision[], p_a_finished_at double precision[],
    p_a_error text[], p_a_worker text[], p_a_event integer[],
    p_e_at double precision[], p_e_kind text[], p_e_step text[], p_e_source text[],
    p_e_target text[], p_e_attempt integer[], p_e_data json[]
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_run bigint;
    v_status text;
    v_seq bigint;
    v_moved integer;
BEGIN
    SELECT id, status, last_seq INTO v_run, v_status, v_seq
    FROM runs WHERE run_id = p_run_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no run with id %', p_run_id USING ERRCODE = 'PL001';
    END IF;
    IF p_run_target IS NOT NULL AND v_status <> p_run_source THEN
        RAISE EXCEPTION 'run % is %, not %', p_run_id, v_status, p_run_source
            USING ERRCODE = 'PL002';
    END IF;
    IF cardinality(p_steps) > 0 THEN
        UPDATE steps AS s
        SET status = c.status, attempts = c.attempts, output = c.output,
            error = c.error, started_at = c.started_at, finished_at = c.finished_at,
            skip_reason = c.skip_reason, fallback_used = c.fallback_used,
            next_attempt_at = c.next_attempt_at, worker = c.worker
        FROM unnest(p_steps, p_expected, p_status, p_attempts, p_output, p_error,
                    p_started_at, p_finished_at, p_skip_reason, p_fallback_used,
                    p_next_attempt_at, p_worker)
             AS c(step_id, expected, status, attempts, output, error, started_at,
                  finished_at, skip_reason, fallback_used, next_attempt_at, worker)
        WHERE s.run = v_run AND s.step_id = c.step_id AND s.status = c.expected;
        GET DIAGNOSTICS v_moved = ROW_COUNT;
        IF v_moved <> cardinality(p_steps) THEN
            RAISE EXCEPTION 'run %: a step is not in the status its change moves it from',
                p_run_id USING ERRCODE = 'PL002';
        END IF;
    END IF;
    IF cardinality(p_a_step) > 0 THEN
        INSERT INTO attempts AS a (run, step_id, attempt, fallback, status, started_at,
                                   finished_at, error, worker, start_seq)
        SELECT v_run, c.step_id, c.attempt, c.fallback, c.status, c.started_at,
               c.finished_at, c.error, c.worker, v_seq + c.event
        FROM unnest(p_a_step, p_a_attempt, p_a_fallback, p_a_status, p_a_started_at,
                    p_a_finished_at, p_a_error, p_a_worker, p_a_event)
             AS c(step_id, attempt, fallback, status, started_at, finished_at, error,
                  worker, event)
        ON CONFLICT (run, step_id, attempt, fallback) DO UPDATE
        SET status = excluded.status,
            finished_at = coalesce(excluded.finished_at, excluded.started_at),
            error = excluded.error;
    END IF;
    INSERT INTO events (run, seq, at, kind, step_id, source, target, attempt, data)
    SELECT v_run, v_seq + e.n, e.at, e.kind, e.step_id, e.source, e.target, e.attempt,
           e.data
    FROM unnest(p_e_at, p_e_kind, p_e_step, p_e_source, p_e_target, p_e_attempt,
                p_e_data) WITH ORDINALITY
         AS e(at, kind, step_id, source, target, attempt, data, n);
    UPDATE runs
    SET last_seq = v_seq + cardinality(p_e_at),
        status = coalesce(p_run_target, status),
        started_at = CASE WHEN p_run_target = 'running' THEN coalesce(started_at, p_run_at)
                          ELSE started_at END,
        finished_at = CASE WHEN p_run_final THEN p_run_at ELSE finished_at END,
        output = CASE WHEN p_run_final THEN p_run_output ELSE output END,
        error = CASE WHEN p_run_final THEN p_run_error ELSE error END
    WHERE id = v_run;
END
$$;

-- Store a person's decision on an approval step as a note of the step, as ONE
-- compare-and-set (Store.record_decision): under the run's row lock, only when no
-- decision is stored on the step yet and the step is waiting.  Returns the outcome:
-- ('stored', NULL), ('taken', the standing note's data), ('not_waiting', the step's
-- status) or ('no_step', NULL); raises PL001 for an unknown run.
CREATE FUNCTION plait_record_decision(
    p_run_id text, p_step_id text, p_at double precision, p_data json,
    OUT outcome text, OUT detail text
) LANGUAGE plpgsql AS $$
DECLARE
    v_run bigint;
    v_seq bigint;
    v_status text;
BEGIN
    SELECT id, last_seq INTO v_run, v_seq FROM runs WHERE run_id = p_run_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no run with id %', p_run_id USING ERRCODE = 'PL001';
    END IF;
    SELECT status INTO v_status FROM steps WHERE run = v_run AND step_id = p_step_id;
    IF NOT FOUND THEN
        outcome := 'no_step';
        RETURN;
    END IF;
    SELECT 'taken', data::text INTO outcome, detail FROM events
    WHERE run = v_run AND kind = 'note' AND step_id = p_step_id
      AND json_typeof(data -> 'approval') <> 'null'
    ORDER BY seq LIMIT 1;
    IF FOUND THEN
        RETURN;
    END IF;
    IF v_status <> 'waiting' THEN
        outcome := 'not_waiting';
        detail := v_status;
        RETURN;
    END IF;
    INSERT INTO events (run, seq, at, kind, step_id, data)
    VALUES (v_run, v_seq + 1, p_at, 'note', p_step_id, p_data);
    UPDATE runs SET last_seq = v_seq + 1 WHERE id = v_run;
    outcome := 'stored';
END
$$;
