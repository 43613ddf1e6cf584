-- 0006_attempt_workers_and_logs: history names the worker that executed each attempt,
-- and keeps the ctx.logger records of attempts run on workers.  The conventions of
-- 0001_initial and the lock order of 0003_attempt_tickets hold.

-- The ctx.logger records of the attempt, a JSON array of {"level", "message",
-- "attempt", "at"} (NULL: none): the run's driver stores each as a history note of
-- the step with the batch that applies (and consumes) the outcome.
ALTER TABLE outcomes ADD COLUMN logs json;

-- Store the outcomes of attempts p_worker ran (Store.complete_attempts): 0003's
-- function, whose items also carry their attempt's log records (p_logs[i], stored in
-- the outcome's logs).
DROP FUNCTION plait_complete_attempts(
    text, text[], text[], integer[], boolean[], text[], text[], json[], json[],
    double precision[], json[], double precision);

CREATE FUNCTION plait_complete_attempts(
    p_worker text, p_run_ids text[], p_steps text[], p_attempts integer[],
    p_fallbacks boolean[], p_tokens text[], p_kinds text[], p_outputs json[],
    p_errors json[], p_at double precision[], p_notes json[], p_noted double precision,
    p_logs json[]
) RETURNS boolean[] LANGUAGE plpgsql SET enable_seqscan = off AS $$
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
$$;

-- Store one batch of a run's changes (Store.write): 0004's function, whose attempt
-- upsert also sets the worker when an attempt's end names one.  On a cluster the
-- driver begins an attempt before any worker claimed it; the end carries the worker
-- that executed it (from its outcome), which history must show.
CREATE OR REPLACE FUNCTION plait_write_batch(
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
    p_e_target text[], p_e_attempt integer[], p_e_data json[],
    p_c_step text[], p_c_attempt integer[], p_c_fallback boolean[],
    p_w_step text[], p_w_attempt integer[], p_w_fallback boolean[],
    p_t_step text[], p_t_attempt integer[], p_t_fallback boolean[],
    p_t_priority double precision[], p_t_pool text[], p_t_pool_limit integer[],
    p_t_payload json[], p_t_rate_count integer[], p_t_rate_period double precision[]
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_run bigint;
    v_status text;
    v_seq bigint;
    v_moved integer;
    v_key text;
BEGIN
    SELECT id, status, last_seq INTO v_run, v_status, v_seq
    FROM runs WHERE run_id = p_run_id FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no run with id %', p_run_id USING ERRCODE = 'PL001';
    END IF;
    IF cardinality(p_w_step) + cardinality(p_t_step) > 0 THEN
        PERFORM FROM tickets AS t
        WHERE t.run = v_run AND (t.step_id, t.attempt, t.fallback) IN (
            SELECT * FROM unnest(p_w_step, p_w_attempt, p_w_fallback)
            UNION ALL
            SELECT * FROM unnest(p_t_step, p_t_attempt, p_t_fallback))
        ORDER BY t.step_id, t.attempt, t.fallback
        FOR UPDATE;
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
            error = excluded.error,
            worker = coalesce(excluded.worker, a.worker);
    END IF;
    IF cardinality(p_e_at) > 0 THEN
        INSERT INTO events (run, seq, at, kind, step_id, source, target, attempt, data)
        SELECT v_run, v_seq + e.n, e.at, e.kind, e.step_id, e.source, e.target,
               e.attempt, e.data
        FROM unnest(p_e_at, p_e_kind, p_e_step, p_e_source, p_e_target, p_e_attempt,
                    p_e_data) WITH ORDINALITY
             AS e(at, kind, step_id, source, target, attempt, data, n);
    END IF;
    IF cardinality(p_e_at) > 0 OR p_run_target IS NOT NULL THEN
        UPDATE runs
        SET last_seq = v_seq + cardinality(p_e_at),
            status = coalesce(p_run_target, status),
            started_at = CASE WHEN p_run_target = 'running'
                              THEN coalesce(started_at, p_run_at) ELSE started_at END,
            finished_at = CASE WHEN p_run_final THEN p_run_at ELSE finished_at END,
            output = CASE WHEN p_run_final THEN p_run_output ELSE output END,
            error = CASE WHEN p_run_final THEN p_run_error ELSE error END
        WHERE id = v_run;
    END IF;
    -- consumed: each outcome must wait in the inbox, and be listed once
    IF cardinality(p_c_step) > 0 THEN
        SELECT json_build_array(c.step_id, c.attempt, c.fallback)::text INTO v_key
        FROM unnest(p_c_step, p_c_attempt, p_c_fallback) WITH ORDINALITY
             AS c(step_id, attempt, fallback, n)
        WHERE NOT EXISTS (
                  SELECT FROM outcomes AS o
                  WHERE o.run = v_run AND o.step_id = c.step_id
                    AND o.attempt = c.attempt AND o.fallback = c.fallback)
           OR EXISTS (
                  SELECT FROM unnest(p_c_step, p_c_attempt, p_c_fallback) WITH ORDINALITY
                       AS d(step_id, attempt, fallback, n)
                  WHERE d.n < c.n AND d.step_id = c.step_id AND d.attempt = c.attempt
                    AND d.fallback = c.fallback)
        ORDER BY c.n LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'run %: an outcome consumed is not in the inbox', p_run_id
                USING ERRCODE = 'PL003', DETAIL = v_key;
        END IF;
        DELETE FROM outcomes AS o
        USING unnest(p_c_step, p_c_attempt, p_c_fallback) AS c(step_id, attempt, fallback)
        WHERE o.run = v_run AND o.step_id = c.step_id AND o.attempt = c.attempt
          AND o.fallback = c.fallback;
    END IF;
    -- withdrawn: a claimed ticket of a pool with a limit frees a slot
    IF cardinality(p_w_step) > 0 THEN
        WITH gone AS (
            DELETE FROM tickets AS t
            USING unnest(p_w_step, p_w_attempt, p_w_fallback)
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
    IF cardinality(p_t_step) > 0 THEN
        SELECT t.step_id INTO v_key
        FROM unnest(p_t_step) WITH ORDINALITY AS t(step_id, n)
        WHERE NOT EXISTS (SELECT FROM steps AS s
                          WHERE s.run = v_run AND s.step_id = t.step_id)
        ORDER BY t.n LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'run %: a ticket of a step it does not have', p_run_id
                USING ERRCODE = 'PL005', DETAIL = v_key;
        END IF;
        SELECT json_build_array(t.step_id, t.attempt, t.fallback)::text INTO v_key
        FROM unnest(p_t_step, p_t_attempt, p_t_fallback) WITH ORDINALITY
             AS t(step_id, attempt, fallback, n)
        WHERE EXISTS (SELECT FROM tickets AS k
                      WHERE k.run = v_run AND k.step_id = t.step_id
                        AND k.attempt = t.attempt AND k.fallback = t.fallback)
           OR EXISTS (SELECT FROM outcomes AS o
                      WHERE o.run = v_run AND o.step_id = t.step_id
                        AND o.attempt = t.attempt AND o.fallback = t.fallback)
           OR EXISTS (SELECT FROM unnest(p_t_step, p_t_attempt, p_t_fallback)
                                  WITH ORDINALITY AS d(step_id, attempt, fallback, n)
                      WHERE d.n < t.n AND d.step_id = t.step_id
                        AND d.attempt = t.attempt AND d.fallback = t.fallback)
        ORDER BY t.n LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'run %: an attempt is dispatched already', p_run_id
                USING ERRCODE = 'PL004', DETAIL = v_key;
        END IF;
        INSERT INTO tickets (run, step_id, attempt, fallback, priority, pool, pool_limit,
                             payload, rate_count, rate_period)
        SELECT v_run, t.step_id, t.attempt, t.fallback, t.priority, t.pool,
               t.pool_limit, t.payload, t.rate_count, t.rate_period
        FROM unnest(p_t_step, p_t_attempt, p_t_fallback, p_t_priority, p_t_pool,
                    p_t_pool_limit, p_t_payload, p_t_rate_count, p_t_rate_period)
             WITH ORDINALITY
             AS t(step_id, attempt, fallback, priority, pool, pool_limit, payload,
                  rate_count, rate_period, n)
        ORDER BY t.n;
        PERFORM pg_notify('plait_work', '');
    END IF;
END
$$;
