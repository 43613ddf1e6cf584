-- 0010_notifications: each notification (docs/notifications.md) delivered once, however
-- many processes see its event.  A deliverer inserts the row of its (run, event, step,
-- target) BEFORE sending, and sends only when its insert stored the row
-- (Store.claim_notification).  run_id is not a reference to runs: an alert has no run
-- (its key names the rule instead); step is '' when the event has no step.
CREATE TABLE notifications (
    run_id     TEXT NOT NULL,
    event      TEXT NOT NULL,
    step       TEXT NOT NULL,
    target     TEXT NOT NULL,
    claimed_at REAL NOT NULL,
    PRIMARY KEY (run_id, event, step, target)
) WITHOUT ROWID;
