-- 0004_pool_rates_breakers: limits that hold across every worker of the cluster
-- (docs/workers.md): a pool's rate, judged when its tickets are claimed, and the state of
-- circuit breakers.  The conventions of 0001_initial and the lock order of
-- 0003_attempt_tickets hold.

-- The rate of a ticket's pool (Ticket.rate_count / rate_period; NULL: none).
ALTER TABLE tickets ADD COLUMN rate_count integer, ADD COLUMN rate_period double precision;

-- When rated tickets of each pool were claimed (clock_timestamp()): the log that a
-- claim judges a pool's rate window with (core.guards.RateWindow's rule: at most
-- rate_count claims in any rate_period seconds).  Written and pruned only by
-- plait_claim_attempts under the pool's advisory lock, so at most rate_count rows per
-- pool are left after each claim.
CREATE TABLE pool_starts (
    pool text        NOT NULL,
    at   timestamptz NOT NULL
);
CREATE INDEX pool_starts_by_pool ON pool_starts (pool, at);

-- The state of each circuit breaker (core.guards.CircuitBreaker.to_json: opaque to
-- the store, which holds no copy of the breaker's rules) and its version, which every
-- update moves by one: a driver reads both, applies the rule, and writes back only if
-- the version is still the one it read (Store.put_breaker).
CREATE TABLE breakers (
    key     text    PRIMARY KEY,
    state   json    NOT NULL,
    version integer NOT NULL
);

-- Store one batch of a run's changes (Store.write): 0003's function, whose dispatched
-- tickets now carry their pool's rate (p_t_rate_count, p_t_rate_period).
DROP FUNCTION plait_write_batch(
    text, text, text, double precision, boolean, json, text,
    text[], text[], text[], integer[], json[], text[], double precision[],
    double precision[], text[], boolean[], double precision[], text[],
    text[], integer[], boolean[], text[], double precision[], double precision[],
    text[], text[], integer[],
    double precision[], text[], text[], text[], text[], integer[], json[],
    text[], integer[], boolean[], text[], integer[], boolean[],
    text[], integer[], boolean[], double precision[], text[], integer[], json[]);

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
            error = excluded.error;
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


-- Claim up to p_limit unclaimed tickets for p_worker (Store.claim_attempts): 0003's
-- function, whose pool admission also judges a pool's rate.  The first time a call
-- meets a rated ticket of a pool whose lock it got, it deletes the pool's claims that
-- fell out of the ticket's window and counts the rest; it then admits a rated ticket
-- only while that count is under rate_count, and records each admitted one in
-- pool_starts.  All of it under the pool's advisory lock, so a second claimer counts
-- the first one's claims once it committed, as for the pool's limit.  The window is
-- judged at the time of the count and a claim recorded at a later time, which can only
-- admit fewer, never more.
CREATE OR REPLACE FUNCTION plait_claim_attempts(p_worker text, p_limit integer,
                                     p_lease double precision)
RETURNS TABLE (run_id text, workflow text, version integer, step_id text,
               attempt integer, fallback boolean, token text, payload json,
               expires_at double precision, priority double precision, stored bigint)
LANGUAGE plpgsql SET enable_seqscan = off SET enable_bitmapscan = off AS $$
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
$$;
