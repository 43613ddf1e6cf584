-- 0010_notifications: each notification (docs/notifications.md) delivered once, however
-- many workers see its event.  A deliverer inserts the row of its (run, event, step,
-- target) BEFORE sending (INSERT ... ON CONFLICT DO NOTHING), and sends only when its
-- insert stored the row (Store.claim_notification).  run_id is not a reference to runs:
-- an alert has no run (its key names the rule instead); step is '' when the event has
-- no step.
CREATE TABLE notifications (
    run_id     text             NOT NULL,
    event      text             NOT NULL,
    step       text             NOT NULL,
    target     text             NOT NULL,
    claimed_at double precision NOT NULL,
    PRIMARY KEY (run_id, event, step, target)
);
