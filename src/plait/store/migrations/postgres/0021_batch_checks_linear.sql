-- 0021_batch_checks_linear: plait_write_batch as in 0020, finding a key listed twice
-- in a batch's consumed outcomes or dispatched tickets with one sort (row_number over
-- the key) instead of comparing every listed key with every earlier one: a batch that
-- dispatched the 10,000 steps of a fan-out spent about 12 s in that comparison.  The
-- errors are the same (the first offending key in list order).

CREATE OR REPLACE FUNCTION plait_write_batch(p_batch jsonb) RETURNS void LANGUAGE plpgsql AS $$
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
$$;
