-- The PostgreSQL schema that applying every migration in order produces.
-- Generated: python tests/migration/test_postgres_migrations.py --write
-- (tests/migration checks it; never edit it by hand, add a migration).

CREATE TABLE plait_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamp with time zone NOT NULL DEFAULT now(),
    CONSTRAINT plait_migrations_pkey PRIMARY KEY (version)
);

CREATE TABLE workflows (
    id bigint GENERATED ALWAYS AS IDENTITY,
    name text NOT NULL,
    version integer NOT NULL,
    fingerprint text NOT NULL,
    definition json NOT NULL,
    created_at double precision NOT NULL,
    CONSTRAINT workflows_id_key UNIQUE (id),
    CONSTRAINT workflows_pkey PRIMARY KEY (name, version)
);

CREATE TABLE runs (
    id bigint GENERATED ALWAYS AS IDENTITY,
    run_id text NOT NULL,
    workflow text NOT NULL,
    version integer NOT NULL,
    fingerprint text NOT NULL,
    status text NOT NULL,
    input json,
    output json,
    error text,
    created_at double precision NOT NULL,
    started_at double precision,
    finished_at double precision,
    retry_of text,
    parent_run_id text,
    sla double precision,
    cancel_requested boolean NOT NULL DEFAULT false,
    owner text,
    heartbeat_at double precision,
    owner_seen_at timestamp with time zone,
    last_seq bigint NOT NULL DEFAULT 0,
    CONSTRAINT runs_run_id_key UNIQUE (run_id),
    CONSTRAINT runs_pkey PRIMARY KEY (id),
    CONSTRAINT runs_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'running'::text, 'waiting'::text, 'completed'::text, 'failed'::text, 'cancelled'::text])))
) WITH (fillfactor=80);

CREATE TABLE steps (
    run bigint NOT NULL,
    step_id text NOT NULL,
    position integer NOT NULL,
    status text NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    output json,
    error text,
    started_at double precision,
    finished_at double precision,
    skip_reason text,
    fallback_used boolean NOT NULL DEFAULT false,
    next_attempt_at double precision,
    worker text,
    CONSTRAINT steps_pkey PRIMARY KEY (run, step_id),
    CONSTRAINT steps_run_fkey FOREIGN KEY (run) REFERENCES runs(id),
    CONSTRAINT steps_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'queued'::text, 'running'::text, 'waiting'::text, 'completed'::text, 'failed'::text, 'skipped'::text, 'upstream_failed'::text, 'cancelled'::text])))
) WITH (fillfactor=80);

CREATE TABLE attempts (
    run bigint NOT NULL,
    step_id text NOT NULL,
    attempt integer NOT NULL,
    fallback boolean NOT NULL,
    status text NOT NULL,
    started_at double precision NOT NULL,
    finished_at double precision,
    error text,
    worker text,
    start_seq bigint NOT NULL,
    CONSTRAINT attempts_pkey PRIMARY KEY (run, step_id, attempt, fallback),
    CONSTRAINT attempts_run_fkey FOREIGN KEY (run) REFERENCES runs(id)
);

CREATE TABLE events (
    run bigint NOT NULL,
    seq bigint NOT NULL,
    at double precision NOT NULL,
    kind text NOT NULL,
    step_id text,
    source text,
    target text,
    attempt integer,
    data json,
    CONSTRAINT events_pkey PRIMARY KEY (run, seq),
    CONSTRAINT events_run_fkey FOREIGN KEY (run) REFERENCES runs(id),
    CONSTRAINT events_kind_check CHECK ((kind = ANY (ARRAY['step'::text, 'attempt'::text, 'run'::text, 'note'::text])))
);

CREATE TABLE schedule_fires (
    workflow text NOT NULL,
    schedule text NOT NULL,
    fire_time double precision NOT NULL,
    run_id text NOT NULL,
    CONSTRAINT schedule_fires_pkey PRIMARY KEY (workflow, schedule, fire_time),
    CONSTRAINT schedule_fires_run_id_fkey FOREIGN KEY (run_id) REFERENCES runs(run_id)
);

CREATE TABLE schedule_sightings (
    workflow text NOT NULL,
    schedule text NOT NULL,
    first_seen double precision NOT NULL,
    CONSTRAINT schedule_sightings_pkey PRIMARY KEY (workflow, schedule)
);

CREATE INDEX runs_by_created ON public.runs USING btree (created_at DESC, id);

CREATE INDEX runs_by_workflow ON public.runs USING btree (workflow, created_at DESC, id);

CREATE OR REPLACE FUNCTION public.plait_write_batch(p_run_id text, p_run_source text, p_run_target text, p_run_at double precision, p_run_final boolean, p_run_output json, p_run_error text, p_steps text[], p_expected text[], p_status text[], p_attempts integer[], p_output json[], p_error text[], p_started_at double precision[], p_finished_at double precision[], p_skip_reason text[], p_fallback_used boolean[], p_next_attempt_at double precision[], p_worker text[], p_a_step text[], p_a_attempt integer[], p_a_fallback boolean[], p_a_status text[], p_a_started_at double precision[], p_a_finished_at double precision[], p_a_error text[], p_a_worker text[], p_a_event integer[], p_e_at double precision[], p_e_kind text[], p_e_step text[], p_e_source text[], p_e_target text[], p_e_attempt integer[], p_e_data json[])
 RETURNS void
 LANGUAGE plpgsql
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION public.plait_record_decision(p_run_id text, p_step_id text, p_at double precision, p_data json, OUT outcome text, OUT detail text)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
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
$function$;

INSERT INTO plait_migrations (version, name) VALUES (1, '0001_initial.sql');
INSERT INTO plait_migrations (version, name) VALUES (2, '0002_schedule_fires.sql');
