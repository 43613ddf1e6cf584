-- 0016_notification_outbox: each notification (docs/notifications.md) a row, written
-- with the event that causes it (in the batch's transaction), then claimed with a lease
-- by one sender at a time, sent, and settled: 'sent', 'pending' again with a later
-- next_at (a retry), or 'given_up' after the last attempt (kept, listed by
-- `plait notifications`).  id is the idempotency key sent with every attempt.
-- run_id is not a reference to runs: an alert has no run.
CREATE TABLE notification_outbox (
    id            TEXT    NOT NULL PRIMARY KEY,
    run_id        TEXT,
    event         TEXT    NOT NULL,
    step          TEXT    NOT NULL,
    target        TEXT    NOT NULL,
    shown         TEXT    NOT NULL,
    body          TEXT    NOT NULL,
    state         TEXT    NOT NULL,
    attempts      INTEGER NOT NULL,
    next_at       REAL    NOT NULL,
    created_at    REAL    NOT NULL,
    error         TEXT,
    claimed_by    TEXT,
    claimed_until REAL
) WITHOUT ROWID;
CREATE INDEX notification_outbox_due ON notification_outbox (state, next_at);
-- a run's rows, found when the run is pruned (docs/retention.md)
CREATE INDEX notification_outbox_by_run ON notification_outbox (run_id) WHERE run_id IS NOT NULL;

-- The once-only claims of 0007_notifications are replaced by the outbox's ids.
DROP TABLE notifications;
