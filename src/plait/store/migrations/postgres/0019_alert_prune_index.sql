-- 0019_alert_prune_index: the outbox rows of alerts (they have no run), oldest first:
-- what retention (plait prune, PLAIT_RETENTION; docs/retention.md) deletes them by
-- once they are settled.  The conventions of 0001_initial hold.
CREATE INDEX notification_outbox_alerts ON notification_outbox (created_at)
    WHERE run_id IS NULL;
