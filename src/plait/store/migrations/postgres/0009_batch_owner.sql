-- 0009_batch_owner: a batch names the driver that writes it, and is refused whole when
-- the run is no longer that driver's (taken over after its lease ran out, or released).
-- A driver paused past its lease (SIGSTOP, a long GC pause, a VM migration) can then
-- never apply an outcome after another driver took the run over; the check is made
-- under the run row's lock, which claim_run's UPDATE of the owner also takes.  The
-- conventions of 0001_initial and the lock order of 0003_attempt_tickets hold.

DROP FUNCTION plait_write_batch(
    text, text, text, double precision, boolean, json, text,
    text[], text[], text[], integer[], json[], text[], double precision[],
    double precision[], text[], boolean[], double precision[], text[],
    text[], integer[], boolean[], text[], double precision[], double precision[],
    text[], text[], integer[],
    double precision[], text[], text[], text[], text[], integer[], json[],
    text[], integer[], boolean[],
    text[], integer[], boolean[],
    text[], integer[], boolean[], double precision[], text[], integer[], json[],
    integer[], double precision[]);

-- Store one batch of a run's changes (Store.write): 0006's function, plus p_owner
-- (NULL: no check), raising PL006 (DETAIL: the run's owner, '' for none) when the run
-- is not p_owner's.
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
    p_e_target text[], p_e_attempt integer[], p_e_data json[],
    p_c_step text[], p_c_attempt integer[], p_c_fallback boolean[],
    p_w_step text[], p_w_attempt integer[], p_w_fallback boolean[],
    p_t_step text[], p_t_attempt integer[], p_t_fallback boolean[],
    p_t_priority double precision[], p_t_pool text[], p_t_pool_limit integer[],
    p_t_payload json[], p_t_rate_count integer[], p_t_rate_period double precision[],
    p_owner text
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_run bigint;
    v_status text;
    v_seq bigint;
    v_moved integer;
    v_key text;
    v_owner text;
BEGIN
    SELECT id, status, last_seq, owner INTO v_run, v_status, v_seq, v_owner
    FROM runs WHERE run_id = p_run_id FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no run with id %', p_run_id USING ERRCODE = 'PL001';
    END IF;
    IF p_owner IS NOT NULL AND v_owner IS DISTINCT FROM p_owner THEN
        RAISE EXCEPTION 'run % is driven by %, not %', p_run_id, v_owner, p_owner
            USING ERRCODE = 'PL006', DETAIL = coalesce(v_owner, '');
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
