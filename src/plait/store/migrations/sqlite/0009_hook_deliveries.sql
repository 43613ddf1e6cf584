-- 0009_hook_deliveries: the webhook deliveries a server accepted (X-Plait-Delivery), so
-- a delivery repeated (a retry, a replay) starts nothing again, whichever process
-- receives it.  The conventions of 0001_initial hold.

-- One row per hook name and delivery id: the run the first delivery started.  Rows
-- received longer ago than a delivery's signature is valid are deleted.
CREATE TABLE hook_deliveries (
    hook        TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    received_at REAL NOT NULL,  -- epoch seconds
    PRIMARY KEY (hook, delivery_id)
) WITHOUT ROWID;

CREATE INDEX hook_deliveries_by_time ON hook_deliveries (received_at);
