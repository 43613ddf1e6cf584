-- 0002_schedule_fires: the fires of schedules (docs/schedules.md), so that each fire starts its
-- run exactly once across every process and host sharing the database.
--
-- A schedule is named by its workflow and its key within it (core.schedule.
-- schedule_key: a hash of its cron, time zone and input, stable across versions).

-- One row per fire that started a run, inserted by the statement that creates the run
-- (Store.claim_fire); the primary key is what makes a second claim of the same fire
-- store nothing.  ``fire_time`` is whole seconds since the epoch, exact in a double.
-- The run is named by its public id: the fire is inserted before the run, in the same
-- statement, and the key is checked at its end.
CREATE TABLE schedule_fires (
    workflow  text             NOT NULL,
    schedule  text             NOT NULL,
    fire_time double precision NOT NULL,
    run_id    text             NOT NULL REFERENCES runs (run_id),
    PRIMARY KEY (workflow, schedule, fire_time)
);

-- When a scheduler first saw each schedule (Store.last_fire with seen_at): fires
-- before it are never started.  One row per schedule, never moved.
CREATE TABLE schedule_sightings (
    workflow   text             NOT NULL,
    schedule   text             NOT NULL,
    first_seen double precision NOT NULL,
    PRIMARY KEY (workflow, schedule)
);
