-- 0018_notification_outbox: each notification (docs/notifications.md) a row, written
-- with the event that causes it (in the batch's transaction), then claimed with a lease
-- by one sender at a time (FOR UPDATE SKIP LOCKED), sent, and settled: 'sent',
-- 'pending' again with a later next_at (a retry), or 'given_up' after the last attempt
-- (kept, listed by `plait notifications`).  id is the idempotency key sent with every
-- attempt.  run_id is not a reference to runs: an alert has no run.
CREATE TABLE notification_outbox (
    id            text             NOT NULL PRIMARY KEY,
    run_id        text,
    event         text             NOT NULL,
    step          text             NOT NULL,
    target        text             NOT NULL,
    shown         text             NOT NULL,
    body          text             NOT NULL,
    state         text             NOT NULL,
    attempts      integer          NOT NULL,
    next_at       double precision NOT NULL,
    created_at    double precision NOT NULL,
    error         text,
    claimed_by    text,
    claimed_until double precision
);
CREATE INDEX notification_outbox_due ON notification_outbox (state, next_at);
-- a run's rows, found when the run is pruned (docs/retention.md)
CREATE INDEX notification_outbox_by_run ON notification_outbox (run_id) WHERE run_id IS NOT NULL;

-- The once-only claims of 0007_notifications are replaced by the outbox's ids.
DROP TABLE notifications;
