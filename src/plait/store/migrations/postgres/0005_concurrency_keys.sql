-- 0005_concurrency_keys: runs bounded per concurrency key across every worker of the
-- cluster (docs/schedules.md).  The conventions of 0001_initial and the lock order of
-- 0003_attempt_tickets hold.  Runs stored before this migration have no key (NULL).

-- The run's key, rendered from its input when it was created, and how many runs of
-- the key may hold a slot at once (both NULL: no key; see plait_key_admits).
ALTER TABLE runs ADD COLUMN concurrency_key text, ADD COLUMN max_runs_per_key integer;

-- The unfinished runs of each key: what plait_key_admits counts the slots taken in.
-- Neither column changes after the run is created and status is in runs_unfinished's
-- predicate already, so heartbeats stay HOT updates.
CREATE INDEX runs_by_concurrency_key ON runs (concurrency_key)
    WHERE concurrency_key IS NOT NULL AND status IN ('pending', 'running', 'waiting');

-- Whether claim_run may take run p_id for p_owner as far as its concurrency key goes
-- (Store.claim_run).  True at once for a run without a key, one that is not pending or
-- waiting (a running run is continued whatever the count), and one p_owner holds
-- already.  Otherwise it takes the key's advisory lock (two-key space: 1886151019,
-- 'plak' in ASCII, and hashtext(key); pools use 'plai'), held to the commit of the
-- claim, and counts the OTHER runs of the key that hold a slot: running ones, and
-- pending or waiting ones whose owner is alive (owner_seen_at within p_lease of the
-- caller's time, now() + p_shift).  VOLATILE, so its count reads a snapshot taken
-- after the lock: a claimer that waited for it sees the claim that held it once
-- committed, and two claimers never both take a key's last slot.  Called from the
-- WHERE of claim_run's UPDATE, after the row's ownership test.
CREATE FUNCTION plait_key_admits(
    p_id bigint, p_key text, p_limit integer, p_status text, p_holder text,
    p_owner text, p_lease double precision, p_shift double precision)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
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
$$;
