-- 0002_schedule_fires: the fires of schedules (docs/schedules.md), so that each fire starts its
-- run exactly once across every process sharing the file.
--
-- A schedule is named by its workflow and its key within it (core.schedule.
-- schedule_key: a hash of its cron, time zone and input, stable across versions).

-- One row per fire that started a run, inserted in the transaction that creates the
-- run (Store.claim_fire); the primary key is what makes a second claim of the same
-- fire fail.  ``fire_time`` is whole seconds since the epoch, exact in a REAL.
CREATE TABLE schedule_fires (
    workflow  TEXT    NOT NULL,
    schedule  TEXT    NOT NULL,
    fire_time REAL    NOT NULL,
    run       INTEGER NOT NULL REFERENCES runs (id),
    PRIMARY KEY (workflow, schedule, fire_time)
) WITHOUT ROWID;

-- When a scheduler first saw each schedule (Store.last_fire with seen_at): fires
-- before it are never started.  One row per schedule, never moved.
CREATE TABLE schedule_sightings (
    workflow   TEXT NOT NULL,
    schedule   TEXT NOT NULL,
    first_seen REAL NOT NULL,
    PRIMARY KEY (workflow, schedule)
) WITHOUT ROWID;
