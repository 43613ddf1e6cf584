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
    concurrency_key text,
    max_runs_per_key integer,
    wake_at double precision,
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

CREATE TABLE tickets (
    id bigint GENERATED ALWAYS AS IDENTITY,
    run bigint NOT NULL,
    step_id text NOT NULL,
    attempt integer NOT NULL,
    fallback boolean NOT NULL,
    priority double precision NOT NULL,
    pool text,
    pool_limit integer,
    payload json NOT NULL,
    created_at timestamp with time zone NOT NULL DEFAULT clock_timestamp(),
    token text,
    claimed_by text,
    expires_at timestamp with time zone,
    rate_count integer,
    rate_period double precision,
    CONSTRAINT tickets_id_key UNIQUE (id),
    CONSTRAINT tickets_pkey PRIMARY KEY (run, step_id, attempt, fallback),
    CONSTRAINT tickets_run_fkey FOREIGN KEY (run) REFERENCES runs(id)
) WITH (fillfactor=80);

CREATE TABLE outcomes (
    id bigint GENERATED ALWAYS AS IDENTITY,
    run bigint NOT NULL,
    step_id text NOT NULL,
    attempt integer NOT NULL,
    fallback boolean NOT NULL,
    kind text NOT NULL,
    output json,
    error json,
    worker text,
    at double precision NOT NULL,
    logs json,
    CONSTRAINT outcomes_id_key UNIQUE (id),
    CONSTRAINT outcomes_pkey PRIMARY KEY (run, step_id, attempt, fallback),
    CONSTRAINT outcomes_run_fkey FOREIGN KEY (run) REFERENCES runs(id),
    CONSTRAINT outcomes_kind_check CHECK ((kind = ANY (ARRAY['ok'::text, 'error'::text, 'interrupted'::text, 'cancelled'::text])))
);

CREATE TABLE pool_starts (
    pool text NOT NULL,
    at timestamp with time zone NOT NULL
);

CREATE TABLE breakers (
    key text NOT NULL,
    state json NOT NULL,
    version integer NOT NULL,
    CONSTRAINT breakers_pkey PRIMARY KEY (key)
);

CREATE TABLE step_cache (
    workflow text NOT NULL,
    step_id text NOT NULL,
    key_hash text NOT NULL,
    output json NOT NULL,
    run_id text NOT NULL,
    created_at double precision NOT NULL,
    CONSTRAINT step_cache_pkey PRIMARY KEY (workflow, step_id, key_hash)
);

CREATE TABLE hook_deliveries (
    hook text NOT NULL,
    delivery_id text NOT NULL,
    run_id text NOT NULL,
    received_at double precision NOT NULL,
    CONSTRAINT hook_deliveries_pkey PRIMARY KEY (hook, delivery_id)
);

CREATE TABLE step_journal (
    id bigint GENERATED ALWAYS AS IDENTITY,
    run bigint NOT NULL,
    step_id text NOT NULL,
    name text NOT NULL,
    value json NOT NULL,
    attempt integer NOT NULL,
    at double precision NOT NULL,
    CONSTRAINT step_journal_id_key UNIQUE (id),
    CONSTRAINT step_journal_pkey PRIMARY KEY (run, step_id, name),
    CONSTRAINT step_journal_run_fkey FOREIGN KEY (run) REFERENCES runs(id) ON DELETE CASCADE
);

CREATE TABLE run_events (
    run bigint NOT NULL,
    name text NOT NULL,
    data json NOT NULL,
    at double precision NOT NULL,
    CONSTRAINT run_events_pkey PRIMARY KEY (run, name),
    CONSTRAINT run_events_run_fkey FOREIGN KEY (run) REFERENCES runs(id) ON DELETE CASCADE
);

CREATE TABLE run_tokens (
    run bigint NOT NULL,
    tokens bigint NOT NULL,
    CONSTRAINT run_tokens_pkey PRIMARY KEY (run),
    CONSTRAINT run_tokens_run_fkey FOREIGN KEY (run) REFERENCES runs(id) ON DELETE CASCADE
);

CREATE TABLE step_tokens (
    run bigint NOT NULL,
    step_id text NOT NULL,
    prompt bigint NOT NULL,
    completion bigint NOT NULL,
    total bigint NOT NULL,
    CONSTRAINT step_tokens_pkey PRIMARY KEY (run, step_id),
    CONSTRAINT step_tokens_run_fkey FOREIGN KEY (run) REFERENCES runs(id) ON DELETE CASCADE
);

CREATE TABLE notification_outbox (
    id text NOT NULL,
    run_id text,
    event text NOT NULL,
    step text NOT NULL,
    target text NOT NULL,
    shown text NOT NULL,
    body text NOT NULL,
    state text NOT NULL,
    attempts integer NOT NULL,
    next_at double precision NOT NULL,
    created_at double precision NOT NULL,
    error text,
    claimed_by text,
    claimed_until double precision,
    CONSTRAINT notification_outbox_pkey PRIMARY KEY (id)
);

CREATE INDEX runs_by_created ON public.runs USING btree (created_at DESC, id);

CREATE INDEX runs_by_workflow ON public.runs USING btree (workflow, created_at DESC, id);

CREATE INDEX tickets_to_claim ON public.tickets USING btree (priority, id) WHERE (token IS NULL);

CREATE UNIQUE INDEX tickets_by_token ON public.tickets USING btree (token) WHERE (token IS NOT NULL);

CREATE INDEX tickets_by_expiry ON public.tickets USING btree (expires_at) WHERE (token IS NOT NULL);

CREATE INDEX tickets_by_pool ON public.tickets USING btree (pool) WHERE ((token IS NOT NULL) AND (pool IS NOT NULL));

CREATE INDEX pool_starts_by_pool ON public.pool_starts USING btree (pool, at);

CREATE INDEX runs_by_concurrency_key ON public.runs USING btree (concurrency_key) WHERE ((concurrency_key IS NOT NULL) AND (status = ANY (ARRAY['pending'::text, 'running'::text, 'waiting'::text])));

CREATE INDEX hook_deliveries_by_time ON public.hook_deliveries USING btree (received_at);

CREATE INDEX runs_waiting_since ON public.runs USING btree (created_at, id) WHERE (status = 'waiting'::text);

CREATE INDEX runs_children ON public.runs USING btree (parent_run_id, status) WHERE (parent_run_id IS NOT NULL);

CREATE INDEX runs_unfinished ON public.runs USING btree (created_at, id) WHERE ((status = ANY (ARRAY['pending'::text, 'running'::text])) OR ((status = 'waiting'::text) AND (wake_at IS NOT NULL)));

CREATE INDEX runs_by_finish ON public.runs USING btree (finished_at, id) WHERE ((parent_run_id IS NULL) AND (finished_at IS NOT NULL));

CREATE INDEX runs_retries ON public.runs USING btree (retry_of) WHERE (retry_of IS NOT NULL);

CREATE INDEX schedule_fires_by_run ON public.schedule_fires USING btree (run_id);

CREATE INDEX step_cache_by_run ON public.step_cache USING btree (run_id);

CREATE INDEX notification_outbox_due ON public.notification_outbox USING btree (state, next_at);

CREATE INDEX notification_outbox_by_run ON public.notification_outbox USING btree (run_id) WHERE (run_id IS NOT NULL);

CREATE INDEX notification_outbox_alerts ON public.notification_outbox USING btree (created_at) WHERE (run_id IS NULL);

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

CREATE OR REPLACE FUNCTION public.plait_claim_attempts(p_worker text, p_limit integer, p_lease double precision)
 RETURNS TABLE(run_id text, workflow text, version integer, step_id text, attempt integer, fallback boolean, token text, payload json, expires_at double precision, priority double precision, stored bigint)
 LANGUAGE plpgsql
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v_expires timestamptz := clock_timestamp() + make_interval(secs => p_lease);
    v_left integer := greatest(p_limit, 0);
    v_claimed bigint[] := '{}';  -- the tickets claimed by this call
    v_pools text[] := '{}';      -- the pools met so far ...
    v_held integer[] := '{}';    -- ... their claimed tickets (NULL: busy, skipped)
    v_started integer[] := '{}'; -- ... their claims in the rate window (NULL: unread)
    v_rated text[];              -- the pool of each rated ticket admitted in a round
    v_now timestamptz;
    v_locked boolean := false;   -- whether this call holds a pool's lock
    v_asked integer;
    v_picked integer;
    v_taken bigint[];
    v_pooled bigint[];
    v_admit bigint[];
    v_at integer;
    v_got boolean;
    v_ticket record;
BEGIN
    WHILE v_left > 0 LOOP
        v_asked := v_left;
        WITH picked AS (
            SELECT t.id, t.pool
            FROM tickets AS t
            WHERE t.token IS NULL
              AND (t.pool IS NULL OR NOT EXISTS (
                       SELECT FROM unnest(v_pools, v_held, v_started)
                                   AS k(pool, held, started)
                       WHERE k.pool = t.pool
                         AND (k.held IS NULL OR k.held >= t.pool_limit
                              OR k.started >= t.rate_count)))
            ORDER BY t.priority, t.id
            LIMIT v_left
            FOR UPDATE SKIP LOCKED),
        taken AS (
            UPDATE tickets AS t
            SET token = replace(gen_random_uuid()::text, '-', ''),
                claimed_by = p_worker, expires_at = v_expires
            FROM picked
            WHERE t.id = picked.id AND picked.pool IS NULL
            RETURNING t.id)
        SELECT (SELECT count(*) FROM picked),
               (SELECT array_agg(id) FROM taken),
               (SELECT array_agg(id) FROM picked WHERE pool IS NOT NULL)
        INTO v_picked, v_taken, v_pooled;
        EXIT WHEN v_picked = 0;
        v_claimed := v_claimed || coalesce(v_taken, '{}');
        v_left := v_left - coalesce(cardinality(v_taken), 0);
        IF v_pooled IS NOT NULL THEN
            v_admit := '{}';
            v_rated := '{}';
            FOR v_ticket IN SELECT t.id, t.pool, t.pool_limit,
                                   CASE WHEN t.rate_period IS NOT NULL
                                        THEN t.rate_count END AS rate_count,
                                   t.rate_period
                            FROM tickets AS t
                            WHERE t.id = ANY (v_pooled) ORDER BY t.priority, t.id
            LOOP
                v_at := array_position(v_pools, v_ticket.pool);
                IF v_at IS NULL THEN
                    IF v_locked THEN
                        v_got := pg_try_advisory_xact_lock(1886151017,
                                                           hashtext(v_ticket.pool));
                    ELSE
                        PERFORM pg_advisory_xact_lock(1886151017, hashtext(v_ticket.pool));
                        v_got := true;
                    END IF;
                    v_locked := v_locked OR v_got;
                    v_pools := v_pools || v_ticket.pool;
                    v_held := v_held || CASE WHEN v_got THEN (
                        SELECT count(*)::integer FROM tickets AS c
                        WHERE c.pool = v_ticket.pool AND c.token IS NOT NULL) END;
                    v_started := v_started || NULL::integer;
                    v_at := cardinality(v_pools);
                END IF;
                IF v_held[v_at] IS NOT NULL AND v_ticket.rate_count IS NOT NULL
                   AND v_started[v_at] IS NULL
                THEN  -- the pool's window, read once per call under the pool's lock
                    v_now := clock_timestamp() - make_interval(secs => v_ticket.rate_period);
                    DELETE FROM pool_starts AS s
                    WHERE s.pool = v_ticket.pool AND s.at <= v_now;
                    v_started[v_at] := (SELECT count(*)::integer FROM pool_starts AS s
                                        WHERE s.pool = v_ticket.pool AND s.at > v_now);
                END IF;
                IF v_held[v_at] IS NOT NULL
                   AND (v_ticket.pool_limit IS NULL OR v_held[v_at] < v_ticket.pool_limit)
                   AND (v_ticket.rate_count IS NULL
                        OR v_started[v_at] < v_ticket.rate_count)
                THEN
                    v_admit := v_admit || v_ticket.id;
                    v_held[v_at] := v_held[v_at] + 1;
                    IF v_ticket.rate_count IS NOT NULL THEN
                        v_started[v_at] := v_started[v_at] + 1;
                        v_rated := v_rated || v_ticket.pool;
                    END IF;
                END IF;
            END LOOP;
            UPDATE tickets AS t
            SET token = replace(gen_random_uuid()::text, '-', ''),
                claimed_by = p_worker, expires_at = v_expires
            WHERE t.id = ANY (v_admit);
            INSERT INTO pool_starts (pool, at)
            SELECT r.pool, clock_timestamp() FROM unnest(v_rated) AS r(pool);
            v_claimed := v_claimed || v_admit;
            v_left := v_left - cardinality(v_admit);
        END IF;
        EXIT WHEN v_picked < v_asked;  -- nothing more to pick
    END LOOP;
    IF cardinality(v_claimed) = 0 THEN
        RETURN;
    END IF;
    -- the claimers' step rows in key order (two tickets of one step, a fallback and
    -- its step, may be claimed by two workers at once)
    PERFORM FROM steps AS s JOIN tickets AS t ON s.run = t.run AND s.step_id = t.step_id
    WHERE t.id = ANY (v_claimed)
    ORDER BY s.run, s.step_id
    FOR NO KEY UPDATE OF s;
    UPDATE steps AS s SET worker = p_worker
    FROM tickets AS t
    WHERE t.id = ANY (v_claimed) AND s.run = t.run AND s.step_id = t.step_id;
    RETURN QUERY
    SELECT r.run_id, r.workflow, r.version, t.step_id, t.attempt, t.fallback, t.token,
           t.payload, extract(epoch FROM t.expires_at)::double precision, t.priority,
           t.id
    FROM tickets AS t JOIN runs AS r ON r.id = t.run
    WHERE t.id = ANY (v_claimed);
END
$function$;

CREATE OR REPLACE FUNCTION public.plait_reap_expired(p_limit integer, p_error text, p_marks text[])
 RETURNS TABLE(run_id text, step_id text, attempt integer)
 LANGUAGE plpgsql
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
AS $function$
#variable_conflict use_column
DECLARE
    v_runs text[];
    v_steps text[];
    v_attempts integer[];
    v_freed boolean;
BEGIN
    WITH expired AS (
        SELECT t.id FROM tickets AS t
        WHERE t.token IS NOT NULL AND t.expires_at < clock_timestamp()
        ORDER BY t.expires_at
        LIMIT greatest(p_limit, 0)
        FOR UPDATE SKIP LOCKED),
    gone AS (
        DELETE FROM tickets AS t
        USING expired AS e
        WHERE t.id = e.id
        RETURNING t.run, t.step_id, t.attempt, t.fallback, t.claimed_by, t.expires_at,
                  t.pool, t.pool_limit),
    stored AS (
        INSERT INTO outcomes (run, step_id, attempt, fallback, kind, error, worker, at)
        SELECT g.run, g.step_id, g.attempt, g.fallback, 'interrupted',
               replace(replace(replace(p_error,
                   p_marks[1], substr(h.text, 2, length(h.text) - 2)),
                   p_marks[2], substr(s.text, 2, length(s.text) - 2)),
                   p_marks[3], g.attempt::text)::json,
               g.claimed_by, extract(epoch FROM clock_timestamp())::double precision
        FROM gone AS g,
             LATERAL (SELECT to_json(g.claimed_by)::text) AS h(text),
             LATERAL (SELECT to_json(g.step_id)::text) AS s(text)
        ORDER BY g.expires_at
        ON CONFLICT (run, step_id, attempt, fallback) DO NOTHING
        RETURNING run, step_id, attempt)
    SELECT array_agg(r.run_id), array_agg(o.step_id), array_agg(o.attempt),
           (SELECT bool_or(pool IS NOT NULL AND pool_limit IS NOT NULL) FROM gone)
    INTO v_runs, v_steps, v_attempts, v_freed
    FROM stored AS o JOIN runs AS r ON r.id = o.run;
    IF v_runs IS NULL THEN
        RETURN;
    END IF;
    PERFORM pg_notify('plait_outcome', d.run_id)
    FROM (SELECT DISTINCT unnest(v_runs) AS run_id) AS d;
    IF v_freed THEN
        PERFORM pg_notify('plait_work', '');
    END IF;
    RETURN QUERY SELECT * FROM unnest(v_runs, v_steps, v_attempts);
END
$function$;

CREATE OR REPLACE FUNCTION public.plait_key_admits(p_id bigint, p_key text, p_limit integer, p_status text, p_holder text, p_owner text, p_lease double precision, p_shift double precision)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_taken bigint;
BEGIN
    IF p_key IS NULL OR p_status NOT IN ('pending', 'waiting')
            OR p_holder IS NOT DISTINCT FROM p_owner THEN
        RETURN true;
    END IF;
    PERFORM pg_advisory_xact_lock(1886151019, hashtext(p_key));
    SELECT count(*) INTO v_taken FROM runs
    WHERE concurrency_key = p_key AND id <> p_id
      AND status IN ('pending', 'running', 'waiting')
      AND (status = 'running'
           OR (owner IS NOT NULL
               AND (owner_seen_at IS NULL  -- never stale, as in claim_run
                    OR owner_seen_at >= now() + make_interval(secs => p_shift - p_lease))));
    RETURN v_taken < coalesce(p_limit, 1);
END;
$function$;

CREATE OR REPLACE FUNCTION public.plait_complete_attempts(p_worker text, p_run_ids text[], p_steps text[], p_attempts integer[], p_fallbacks boolean[], p_tokens text[], p_kinds text[], p_outputs json[], p_errors json[], p_at double precision[], p_notes json[], p_noted double precision, p_logs json[])
 RETURNS boolean[]
 LANGUAGE plpgsql
 SET enable_seqscan TO 'off'
AS $function$
DECLARE
    v_done bigint[];  -- the items that count, by position (from 1)
    v_freed integer;
BEGIN
    PERFORM FROM runs AS r
    WHERE r.id IN (
        WITH items AS (
            SELECT i.*, k.id AS run,
                   row_number() OVER (PARTITION BY i.run_id, i.step_id, i.attempt,
                                                   i.fallback, i.token ORDER BY i.n) AS nth
            FROM unnest(p_run_ids, p_steps, p_attempts, p_fallbacks, p_tokens)
                 WITH ORDINALITY AS i(run_id, step_id, attempt, fallback, token, n)
            JOIN runs AS k ON k.run_id = i.run_id)
        SELECT i.run FROM items AS i
        WHERE i.nth > 1 OR NOT EXISTS (
            SELECT FROM tickets AS t
            WHERE t.run = i.run AND t.step_id = i.step_id AND t.attempt = i.attempt
              AND t.fallback = i.fallback AND t.token = i.token
              AND t.claimed_by = p_worker))
    ORDER BY r.id
    FOR NO KEY UPDATE;
    WITH items AS (
        SELECT i.*, k.id AS run,
               row_number() OVER (PARTITION BY i.run_id, i.step_id, i.attempt,
                                               i.fallback, i.token ORDER BY i.n) AS nth
        FROM unnest(p_run_ids, p_steps, p_attempts, p_fallbacks, p_tokens)
             WITH ORDINALITY AS i(run_id, step_id, attempt, fallback, token, n)
        JOIN runs AS k ON k.run_id = i.run_id)
    SELECT coalesce(array_agg(held.n), '{}') INTO v_done
    FROM (SELECT i.n FROM tickets AS t
          JOIN items AS i ON t.run = i.run AND t.step_id = i.step_id
                         AND t.attempt = i.attempt AND t.fallback = i.fallback
          WHERE i.nth = 1 AND t.token = i.token AND t.claimed_by = p_worker
          ORDER BY t.run, t.step_id, t.attempt, t.fallback
          FOR UPDATE OF t) AS held;
    IF cardinality(v_done) > 0 THEN
        WITH items AS (
            SELECT i.*, k.id AS run
            FROM unnest(p_run_ids, p_steps, p_attempts, p_fallbacks, p_kinds, p_outputs,
                        p_errors, p_at, p_logs) WITH ORDINALITY
                 AS i(run_id, step_id, attempt, fallback, kind, output, error, at, logs,
                      n)
            JOIN runs AS k ON k.run_id = i.run_id
            WHERE i.n = ANY (v_done)),
        gone AS (
            DELETE FROM tickets AS t
            USING items AS i
            WHERE t.run = i.run AND t.step_id = i.step_id AND t.attempt = i.attempt
              AND t.fallback = i.fallback
            RETURNING t.token, t.pool, t.pool_limit),
        stored AS (
            INSERT INTO outcomes (run, step_id, attempt, fallback, kind, output, error,
                                  worker, at, logs)
            SELECT i.run, i.step_id, i.attempt, i.fallback, i.kind, i.output, i.error,
                   p_worker, i.at, i.logs
            FROM items AS i ORDER BY i.n)
        SELECT count(*) INTO v_freed FROM gone
        WHERE pool IS NOT NULL AND pool_limit IS NOT NULL;
        PERFORM pg_notify('plait_outcome', d.run_id)
        FROM (SELECT DISTINCT p_run_ids[n] AS run_id FROM unnest(v_done) AS n) AS d;
        IF v_freed > 0 THEN
            PERFORM pg_notify('plait_work', '');
        END IF;
    END IF;
    IF cardinality(v_done) < cardinality(p_tokens) THEN
        PERFORM FROM runs AS r
        WHERE r.run_id IN (SELECT p_run_ids[n]
                           FROM generate_subscripts(p_run_ids, 1) AS n
                           WHERE NOT (n = ANY (v_done)))
        ORDER BY r.id
        FOR NO KEY UPDATE;
        WITH late AS (
            SELECT k.id AS run, i.step_id, i.note,
                   row_number() OVER (PARTITION BY k.id ORDER BY i.n) AS nth
            FROM unnest(p_run_ids, p_steps, p_notes) WITH ORDINALITY
                 AS i(run_id, step_id, note, n)
            JOIN runs AS k ON k.run_id = i.run_id
            WHERE NOT (i.n = ANY (v_done))),
        noted AS (
            INSERT INTO events (run, seq, at, kind, step_id, data)
            SELECT l.run, r.last_seq + l.nth, p_noted, 'note', l.step_id, l.note
            FROM late AS l JOIN runs AS r ON r.id = l.run)
        UPDATE runs AS r SET last_seq = r.last_seq + c.notes
        FROM (SELECT run, count(*) AS notes FROM late GROUP BY run) AS c
        WHERE r.id = c.run;
    END IF;
    RETURN ARRAY(SELECT n = ANY (v_done)
                 FROM generate_series(1, cardinality(p_tokens)) AS n ORDER BY n);
END
$function$;

CREATE OR REPLACE FUNCTION public.plait_write_batch(p_batch jsonb)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
DECLARE
    b record;
    r record;
    v_run bigint;
    v_status text;
    v_seq bigint;
    v_owner text;
    v_moved integer;
    v_total integer;
    v_events integer := 0;
    v_key text;
    -- the keys of the claims lists, read once: each list is used several times
    v_c_step text[] := '{}'; v_c_attempt integer[] := '{}'; v_c_fallback boolean[] := '{}';
    v_w_step text[] := '{}'; v_w_attempt integer[] := '{}'; v_w_fallback boolean[] := '{}';
    v_t_step text[] := '{}'; v_t_attempt integer[] := '{}'; v_t_fallback boolean[] := '{}';
BEGIN
    SELECT * INTO b FROM jsonb_to_record(p_batch)
        AS x(run_id text, owner text, run jsonb, steps jsonb, attempts jsonb, events jsonb,
             consumed jsonb, withdrawn jsonb, dispatch jsonb, count integer);
    SELECT * INTO r FROM jsonb_to_record(coalesce(b.run, '{}'))
        AS x(source text, target text, at double precision, final boolean, output text,
             error text, wake_at double precision);
    SELECT id, status, last_seq, owner INTO v_run, v_status, v_seq, v_owner
    FROM runs WHERE run_id = b.run_id FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no run with id %', b.run_id USING ERRCODE = 'PL001';
    END IF;
    IF b.owner IS NOT NULL AND v_owner IS DISTINCT FROM b.owner THEN
        RAISE EXCEPTION 'run % is driven by %, not %', b.run_id, v_owner, b.owner
            USING ERRCODE = 'PL006', DETAIL = coalesce(v_owner, '');
    END IF;
    IF b.consumed IS NOT NULL THEN
        SELECT coalesce(array_agg(k.step ORDER BY k.n), '{}'),
               coalesce(array_agg(k.attempt ORDER BY k.n), '{}'),
               coalesce(array_agg(k.fallback ORDER BY k.n), '{}')
        INTO v_c_step, v_c_attempt, v_c_fallback
        FROM ROWS FROM (jsonb_to_recordset(b.consumed)
                        AS (step text, attempt integer, fallback boolean))
             WITH ORDINALITY AS k(step, attempt, fallback, n);
    END IF;
    IF b.withdrawn IS NOT NULL THEN
        SELECT coalesce(array_agg(k.step ORDER BY k.n), '{}'),
               coalesce(array_agg(k.attempt ORDER BY k.n), '{}'),
               coalesce(array_agg(k.fallback ORDER BY k.n), '{}')
        INTO v_w_step, v_w_attempt, v_w_fallback
        FROM ROWS FROM (jsonb_to_recordset(b.withdrawn)
                        AS (step text, attempt integer, fallback boolean))
             WITH ORDINALITY AS k(step, attempt, fallback, n);
    END IF;
    IF b.dispatch IS NOT NULL THEN
        SELECT coalesce(array_agg(k.step ORDER BY k.n), '{}'),
               coalesce(array_agg(k.attempt ORDER BY k.n), '{}'),
               coalesce(array_agg(k.fallback ORDER BY k.n), '{}')
        INTO v_t_step, v_t_attempt, v_t_fallback
        FROM ROWS FROM (jsonb_to_recordset(b.dispatch)
                        AS (step text, attempt integer, fallback boolean))
             WITH ORDINALITY AS k(step, attempt, fallback, n);
    END IF;
    IF cardinality(v_w_step) + cardinality(v_t_step) > 0 THEN
        PERFORM FROM tickets AS t
        WHERE t.run = v_run AND (t.step_id, t.attempt, t.fallback) IN (
            SELECT * FROM unnest(v_w_step, v_w_attempt, v_w_fallback)
            UNION ALL
            SELECT * FROM unnest(v_t_step, v_t_attempt, v_t_fallback))
        ORDER BY t.step_id, t.attempt, t.fallback
        FOR UPDATE;
    END IF;
    IF r.target IS NOT NULL AND v_status <> r.source THEN
        RAISE EXCEPTION 'run % is %, not %', b.run_id, v_status, r.source
            USING ERRCODE = 'PL002';
    END IF;
    IF b.steps IS NOT NULL THEN
        WITH c AS MATERIALIZED (
            SELECT * FROM jsonb_to_recordset(b.steps)
                AS x(step text, expected text, status text, attempts integer,
                     output text, error text, started_at double precision,
                     finished_at double precision, skip_reason text,
                     fallback_used boolean, next_attempt_at double precision,
                     worker text)),
        moved AS (
            UPDATE steps AS s
            SET status = c.status, attempts = c.attempts, output = c.output::json,
                error = c.error, started_at = c.started_at, finished_at = c.finished_at,
                skip_reason = c.skip_reason, fallback_used = c.fallback_used,
                next_attempt_at = c.next_attempt_at, worker = c.worker
            FROM c
            WHERE s.run = v_run AND s.step_id = c.step AND s.status = c.expected
            RETURNING 1)
        SELECT (SELECT count(*) FROM c), (SELECT count(*) FROM moved)
        INTO v_total, v_moved;
        IF v_moved <> v_total THEN
            RAISE EXCEPTION 'run %: a step is not in the status its change moves it from',
                b.run_id USING ERRCODE = 'PL002';
        END IF;
    END IF;
    IF b.attempts IS NOT NULL THEN
        INSERT INTO attempts AS a (run, step_id, attempt, fallback, status, started_at,
                                   finished_at, error, worker, start_seq)
        SELECT v_run, c.step, c.attempt, c.fallback, c.status, c.started_at,
               c.finished_at, c.error, c.worker, v_seq + c.event
        FROM jsonb_to_recordset(b.attempts)
             AS c(step text, attempt integer, fallback boolean, status text,
                  started_at double precision, finished_at double precision, error text,
                  worker text, event integer)
        ON CONFLICT (run, step_id, attempt, fallback) DO UPDATE
        SET status = excluded.status,
            finished_at = coalesce(excluded.finished_at, excluded.started_at),
            error = excluded.error,
            worker = coalesce(excluded.worker, a.worker);
    END IF;
    IF b.events IS NOT NULL THEN
        INSERT INTO events (run, seq, at, kind, step_id, source, target, attempt, data)
        SELECT v_run, v_seq + coalesce(e.seq, e.n), e.at, e.kind, e.step, e.source,
               e.target, e.attempt, e.data::json
        FROM ROWS FROM (jsonb_to_recordset(b.events)
                        AS (at double precision, kind text, step text, source text,
                            target text, attempt integer, data text, seq integer))
             WITH ORDINALITY AS e(at, kind, step, source, target, attempt, data, seq, n);
        GET DIAGNOSTICS v_events = ROW_COUNT;
        v_events := coalesce(b.count, v_events);
    END IF;
    IF v_events > 0 OR r.target IS NOT NULL THEN
        UPDATE runs
        SET last_seq = v_seq + v_events,
            status = coalesce(r.target, status),
            started_at = CASE WHEN r.target = 'running'
                              THEN coalesce(started_at, r.at) ELSE started_at END,
            finished_at = CASE WHEN r.final THEN r.at ELSE finished_at END,
            output = CASE WHEN r.final THEN r.output::json ELSE output END,
            error = CASE WHEN r.final THEN r.error ELSE error END,
            wake_at = CASE WHEN r.target IS NOT NULL THEN r.wake_at ELSE wake_at END
        WHERE id = v_run;
    END IF;
    -- consumed: each outcome must wait in the inbox, and be listed once
    IF cardinality(v_c_step) > 0 THEN
        SELECT json_build_array(c.step_id, c.attempt, c.fallback)::text INTO v_key
        FROM (SELECT u.*, row_number() OVER (PARTITION BY u.step_id, u.attempt, u.fallback
                                             ORDER BY u.n) AS k
              FROM unnest(v_c_step, v_c_attempt, v_c_fallback) WITH ORDINALITY
                   AS u(step_id, attempt, fallback, n)) AS c
        WHERE c.k > 1
           OR NOT EXISTS (
                  SELECT FROM outcomes AS o
                  WHERE o.run = v_run AND o.step_id = c.step_id
                    AND o.attempt = c.attempt AND o.fallback = c.fallback)
        ORDER BY c.n LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'run %: an outcome consumed is not in the inbox', b.run_id
                USING ERRCODE = 'PL003', DETAIL = v_key;
        END IF;
        DELETE FROM outcomes AS o
        USING unnest(v_c_step, v_c_attempt, v_c_fallback) AS c(step_id, attempt, fallback)
        WHERE o.run = v_run AND o.step_id = c.step_id AND o.attempt = c.attempt
          AND o.fallback = c.fallback;
    END IF;
    -- withdrawn: a claimed ticket of a pool with a limit frees a slot
    IF cardinality(v_w_step) > 0 THEN
        WITH gone AS (
            DELETE FROM tickets AS t
            USING unnest(v_w_step, v_w_attempt, v_w_fallback)
                  AS w(step_id, attempt, fallback)
            WHERE t.run = v_run AND t.step_id = w.step_id AND t.attempt = w.attempt
              AND t.fallback = w.fallback
            RETURNING t.token, t.pool, t.pool_limit)
        SELECT count(*) INTO v_moved FROM gone
        WHERE token IS NOT NULL AND pool IS NOT NULL AND pool_limit IS NOT NULL;
        IF v_moved > 0 THEN
            PERFORM pg_notify('plait_work', '');
        END IF;
    END IF;
    -- dispatch: of the run's steps, each key new
    IF cardinality(v_t_step) > 0 THEN
        SELECT t.step_id INTO v_key
        FROM unnest(v_t_step) WITH ORDINALITY AS t(step_id, n)
        WHERE NOT EXISTS (SELECT FROM steps AS s
                          WHERE s.run = v_run AND s.step_id = t.step_id)
        ORDER BY t.n LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'run %: a ticket of a step it does not have', b.run_id
                USING ERRCODE = 'PL005', DETAIL = v_key;
        END IF;
        SELECT json_build_array(t.step_id, t.attempt, t.fallback)::text INTO v_key
        FROM (SELECT u.*, row_number() OVER (PARTITION BY u.step_id, u.attempt, u.fallback
                                             ORDER BY u.n) AS k
              FROM unnest(v_t_step, v_t_attempt, v_t_fallback) WITH ORDINALITY
                   AS u(step_id, attempt, fallback, n)) AS t
        WHERE t.k > 1
           OR EXISTS (SELECT FROM tickets AS k
                      WHERE k.run = v_run AND k.step_id = t.step_id
                        AND k.attempt = t.attempt AND k.fallback = t.fallback)
           OR EXISTS (SELECT FROM outcomes AS o
                      WHERE o.run = v_run AND o.step_id = t.step_id
                        AND o.attempt = t.attempt AND o.fallback = t.fallback)
        ORDER BY t.n LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'run %: an attempt is dispatched already', b.run_id
                USING ERRCODE = 'PL004', DETAIL = v_key;
        END IF;
        INSERT INTO tickets (run, step_id, attempt, fallback, priority, pool, pool_limit,
                             payload, rate_count, rate_period)
        SELECT v_run, t.step, t.attempt, t.fallback, t.priority, t.pool, t.pool_limit,
               t.payload::json, t.rate_count, t.rate_period
        FROM ROWS FROM (jsonb_to_recordset(b.dispatch)
                        AS (step text, attempt integer, fallback boolean,
                            priority double precision, pool text, pool_limit integer,
                            payload text, rate_count integer, rate_period double precision))
             WITH ORDINALITY AS t(step, attempt, fallback, priority, pool, pool_limit,
                                  payload, rate_count, rate_period, n)
        ORDER BY t.n;
        PERFORM pg_notify('plait_work', '');
    END IF;
END
$function$;

INSERT INTO plait_migrations (version, name) VALUES (1, '0001_initial.sql');
INSERT INTO plait_migrations (version, name) VALUES (2, '0002_schedule_fires.sql');
INSERT INTO plait_migrations (version, name) VALUES (3, '0003_attempt_tickets.sql');
INSERT INTO plait_migrations (version, name) VALUES (4, '0004_pool_rates_breakers.sql');
INSERT INTO plait_migrations (version, name) VALUES (5, '0005_concurrency_keys.sql');
INSERT INTO plait_migrations (version, name) VALUES (6, '0006_attempt_workers_and_logs.sql');
INSERT INTO plait_migrations (version, name) VALUES (7, '0007_notifications.sql');
INSERT INTO plait_migrations (version, name) VALUES (8, '0008_step_cache.sql');
INSERT INTO plait_migrations (version, name) VALUES (9, '0009_batch_owner.sql');
INSERT INTO plait_migrations (version, name) VALUES (10, '0010_hook_deliveries.sql');
INSERT INTO plait_migrations (version, name) VALUES (11, '0011_batch_document.sql');
INSERT INTO plait_migrations (version, name) VALUES (12, '0012_step_journal.sql');
INSERT INTO plait_migrations (version, name) VALUES (13, '0013_run_events.sql');
INSERT INTO plait_migrations (version, name) VALUES (14, '0014_child_waits.sql');
INSERT INTO plait_migrations (version, name) VALUES (15, '0015_run_wake_at.sql');
INSERT INTO plait_migrations (version, name) VALUES (16, '0016_run_tokens.sql');
INSERT INTO plait_migrations (version, name) VALUES (17, '0017_prune_indexes.sql');
INSERT INTO plait_migrations (version, name) VALUES (18, '0018_notification_outbox.sql');
INSERT INTO plait_migrations (version, name) VALUES (19, '0019_alert_prune_index.sql');
INSERT INTO plait_migrations (version, name) VALUES (20, '0020_folded_history.sql');
INSERT INTO plait_migrations (version, name) VALUES (21, '0021_batch_checks_linear.sql');
