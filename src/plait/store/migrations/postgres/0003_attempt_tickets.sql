-- 0003_attempt_tickets: claimable attempts (tickets), the outcome inbox, and the
-- functions that claim, complete and reap them (issue 11; the contract is
-- plait.store.base's docstring, the design docs/design/workers.md).  The conventions
-- of 0001_initial hold; times judged by the database (lease expiry) are timestamptz
-- from clock_timestamp(), never a caller's clock.
--
-- Locks, always taken in this order, so that no two of these transactions wait for
-- each other in a cycle:
--   1. a run's row (FOR NO KEY UPDATE: the run's driver writing a batch, or a
--      completion noting a late result in the run's history);
--   2. tickets, by key (run, step_id, attempt, fallback), in key order; claimers and
--      reapers never wait for a ticket (SKIP LOCKED);
--   3. step rows, by key (a claim naming the step's worker; a batch's step changes).
-- One exception to 0001's rule that a run's writers lock its row first: a claim sets
-- the ``worker`` column of the claimed tickets' step rows without it (a claim spans
-- runs); the step row's own lock orders that write with the driver's, and a driver's
-- later write of the row stores the worker it gives.
-- Pool admission takes transaction-level advisory locks (plait_claim_attempts).
-- Inserting an outcome or a ticket takes a KEY SHARE lock on its run's row (the
-- foreign key), which the run writers' NO KEY UPDATE lock does not block.
--
-- Notifications, sent inside the transaction and so delivered only once it commits:
--   plait_work    (payload ''):     tickets were stored, or a claimed ticket of a pool
--                                   with a limit was released (a slot freed): claim;
--   plait_outcome (payload run_id): an outcome of that run entered its inbox: apply.

-- An attempt a run's driver stored for any worker to claim.  token, claimed_by and
-- expires_at are NULL until it is claimed.  ``id`` is the order tickets were stored
-- in (it breaks ties of priority); created_at is the database's time of the store.
-- The payload is ``json`` like every stored value (its exact text, 0001's convention).
CREATE TABLE tickets (
    id         bigint           GENERATED ALWAYS AS IDENTITY UNIQUE,
    run        bigint           NOT NULL REFERENCES runs (id),
    step_id    text             NOT NULL,
    attempt    integer          NOT NULL,
    fallback   boolean          NOT NULL,
    priority   double precision NOT NULL,  -- lower is claimed first
    pool       text,
    pool_limit integer,                    -- claimed tickets of the pool at most
    payload    json             NOT NULL,  -- opaque to the store
    created_at timestamptz      NOT NULL DEFAULT clock_timestamp(),
    token      text,
    claimed_by text,
    expires_at timestamptz,
    PRIMARY KEY (run, step_id, attempt, fallback)
) WITH (fillfactor = 80);

-- The claim order of the tickets nobody holds (a claim walks it and stops at its limit).
CREATE INDEX tickets_to_claim ON tickets (priority, id) WHERE token IS NULL;

-- Claimed tickets by their token (a fresh uuid4 per claim), for heartbeats.
CREATE UNIQUE INDEX tickets_by_token ON tickets (token) WHERE token IS NOT NULL;

-- Claimed tickets by expiry, for the reapers.
CREATE INDEX tickets_by_expiry ON tickets (expires_at) WHERE token IS NOT NULL;

-- Claimed tickets per pool, counted when a pool with a limit admits a ticket.
CREATE INDEX tickets_by_pool ON tickets (pool) WHERE token IS NOT NULL AND pool IS NOT NULL;

-- How attempts ended, until the run's driver applies them; at most one per attempt
-- (the primary key is what makes a late result and a reaper's ``interrupted`` never
-- both count).  ``id`` is the order they arrived in.
CREATE TABLE outcomes (
    id       bigint           GENERATED ALWAYS AS IDENTITY UNIQUE,
    run      bigint           NOT NULL REFERENCES runs (id),
    step_id  text             NOT NULL,
    attempt  integer          NOT NULL,
    fallback boolean          NOT NULL,
    kind     text             NOT NULL
             CHECK (kind IN ('ok', 'error', 'interrupted', 'cancelled')),
    output   json,
    error    json,             -- a JSON object
    worker   text,
    at       double precision NOT NULL,  -- the completing worker's clock (history only)
    PRIMARY KEY (run, step_id, attempt, fallback)
);

-- Runs that may need a driver (runs_to_drive walks it oldest first).
CREATE INDEX runs_unfinished ON runs (created_at, id)
    WHERE status IN ('pending', 'running');

-- Store one batch of a run's changes (Store.write), atomically, in one round trip:
-- 0001's function, with the batch's claims lists (WriteBatch.consumed, withdrawn,
-- dispatch) applied in the same transaction, after its step and run changes.
--
-- Parameters: those of 0001's version (see there), then
--   p_c_*: the inbox outcomes consumed (keys), each must be there, once;
--   p_w_*: the tickets withdrawn (keys); absent ones are ignored;
--   p_t_*: the tickets dispatched, unclaimed, stored in the order given.
-- Raises PL001 (no such run), PL002 (a change does not apply: the client reads the
-- stored state to say why), PL003 (a consumed outcome is not in the inbox or is listed
-- twice), PL004 (a dispatched key is a ticket or an inbox outcome already, or listed
-- twice) and PL005 (a ticket of a step the run does not have); the DETAIL of PL003
-- and PL004 is the key as a JSON array [step_id, attempt, fallback], of PL005 the
-- step id.  Nothing is stored then.
--
-- Differences from 0001's version: the run's row is locked FOR NO KEY UPDATE (writers
-- of a run still take turns, while workers' outcome inserts, which take KEY SHARE on
-- it, go on); the tickets the batch withdraws or dispatches are locked before any
-- step row (the lock order above); the run's row is not rewritten by a batch that
-- adds no event and moves no run.
DROP FUNCTION plait_write_batch(
    text, text, text, double precision, boolean, json, text,
    text[], text[], text[], integer[], json[], text[], double precision[],
    double precision[], text[], boolean[], double precision[], text[],
    text[], integer[], boolean[], text[], double precision[], double precision[],
    text[], text[], integer[],
    double precision[], text[], text[], text[], text[], integer[], json[]);

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
    p_t_payload json[]
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
                             payload)
        SELECT v_run, t.step_id, t.attempt, t.fallback, t.priority, t.pool,
               t.pool_limit, t.payload
        FROM unnest(p_t_step, p_t_attempt, p_t_fallback, p_t_priority, p_t_pool,
                    p_t_pool_limit, p_t_payload) WITH ORDINALITY
             AS t(step_id, attempt, fallback, priority, pool, pool_limit, payload, n)
        ORDER BY t.n;
        PERFORM pg_notify('plait_work', '');
    END IF;
END
$$;

-- Claim up to p_limit unclaimed tickets for p_worker (Store.claim_attempts), each with
-- a fresh token (uuid4 hex) and an expiry p_lease seconds after clock_timestamp();
-- the step rows of the claimed tickets name p_worker.  Returns the claimed tickets
-- with their run, in no particular order (``priority`` and ``stored`` give the claim
-- order).
--
-- A round picks the next tickets in claim order, at most as many as are still
-- wanted, locking them and skipping those other claimers hold (FOR UPDATE SKIP
-- LOCKED, in a CTE so that the LIMIT is applied once), and claims at once those of no
-- pool.  A pooled ticket is claimed only after its pool admits it: the first time a
-- call meets a pool it takes the pool's advisory lock (two-key space: 1886151017,
-- 'plai' in ASCII, and hashtext(pool)) and counts the pool's claimed tickets across
-- the store; holding the lock to its commit, the call admits tickets while the count
-- is under each ticket's pool_limit.  Two claimers therefore never both take a
-- pool's last slot: the second counts after the first committed.  A call waits for a
-- pool's lock only while it holds no other pool's lock, and otherwise only tries it
-- (a pool another claimer is admitting is left to it), so claimers never deadlock on
-- pool locks.  A pool met full (or busy) is skipped by the rounds that follow, which
-- continue until enough tickets are claimed or none is left to pick.
--
-- Plans: every statement here (and in plait_complete_attempts and
-- plait_reap_expired) is a walk of an index in order or a lookup by key, never a scan
-- of a whole table; but plpgsql keeps a statement's plan for the connection's life,
-- and a plan made while a table was young (a new database) would scan it whole and
-- keep doing so as it grows.  So these functions turn sequential scans off.  They
-- also turn bitmap scans off: a queue's indexes fill with the entries of tickets
-- claimed or deleted since the last vacuum, and an ordered index scan marks those
-- dead as it passes them, so the next claim skips them, where a bitmap scan would
-- visit every one of them again on every claim.
CREATE FUNCTION plait_claim_attempts(p_worker text, p_limit integer,
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
                       SELECT FROM unnest(v_pools, v_held) AS k(pool, held)
                       WHERE k.pool = t.pool
                         AND (k.held IS NULL OR k.held >= t.pool_limit)))
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
            FOR v_ticket IN SELECT t.id, t.pool, t.pool_limit FROM tickets AS t
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
                    v_at := cardinality(v_pools);
                END IF;
                IF v_held[v_at] IS NOT NULL
                   AND (v_ticket.pool_limit IS NULL OR v_held[v_at] < v_ticket.pool_limit)
                THEN
                    v_admit := v_admit || v_ticket.id;
                    v_held[v_at] := v_held[v_at] + 1;
                END IF;
            END LOOP;
            UPDATE tickets AS t
            SET token = replace(gen_random_uuid()::text, '-', ''),
                claimed_by = p_worker, expires_at = v_expires
            WHERE t.id = ANY (v_admit);
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

-- Store the outcomes of attempts p_worker ran (Store.complete_attempts), in one
-- transaction.  Item i: the attempt (p_run_ids[i], p_steps[i], p_attempts[i],
-- p_fallbacks[i]) completed with token p_tokens[i], as p_kinds[i], p_outputs[i] and
-- p_errors[i], at p_at[i].  An item counts when the ticket of its attempt still
-- exists, is held by p_worker and carries its token (of several items with one
-- attempt and token, the first): the ticket is deleted and the outcome enters the
-- inbox, worker p_worker.  Any other item stores only its note p_notes[i] in its
-- run's history (kind note, at p_noted), when the run exists.  Returns, per item in
-- order, whether it counted; notifies plait_outcome once per run that received an
-- outcome (and plait_work when a slot of a pool with a limit was freed).
--
-- Locks, in the order at the top of this file: the runs of the items that a first
-- read (without locks) finds late, since their history gets a note; the tickets to
-- delete, in key order (one a driver is withdrawing meanwhile is gone once its lock
-- is granted: that item is late after all); then the runs of such items.
CREATE FUNCTION plait_complete_attempts(
    p_worker text, p_run_ids text[], p_steps text[], p_attempts integer[],
    p_fallbacks boolean[], p_tokens text[], p_kinds text[], p_outputs json[],
    p_errors json[], p_at double precision[], p_notes json[], p_noted double precision
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
                        p_errors, p_at) WITH ORDINALITY
                 AS i(run_id, step_id, attempt, fallback, kind, output, error, at, n)
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
                                  worker, at)
            SELECT i.run, i.step_id, i.attempt, i.fallback, i.kind, i.output, i.error,
                   p_worker, i.at
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

-- Turn up to p_limit claimed tickets whose lease expired (clock_timestamp()) into
-- ``interrupted`` outcomes (Store.reap_expired), soonest expired first; returns
-- (run_id, step_id, attempt) of each.  ONE guarded statement does it: the expired
-- tickets are locked skipping those another reaper (or a completion, a withdrawal)
-- holds, deleted, and their outcomes inserted ON CONFLICT DO NOTHING, so concurrent
-- reapers reap each ticket exactly once and an attempt never gets two outcomes.
-- The error is p_error, a JSON text in which p_marks[1], [2] and [3] stand for the
-- holder, the step id and the attempt (the client's one wording, base.reaped_error).
-- Notifies plait_outcome per run reaped into, and plait_work when a pool with a limit
-- got a slot back.
CREATE FUNCTION plait_reap_expired(p_limit integer, p_error text, p_marks text[])
RETURNS TABLE (run_id text, step_id text, attempt integer)
LANGUAGE plpgsql SET enable_seqscan = off SET enable_bitmapscan = off AS $$
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
$$;
