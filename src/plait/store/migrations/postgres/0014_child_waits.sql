-- 0014_child_waits: finding the waiting parents whose child run ended
-- (parents_to_wake; docs/subworkflows.md).  The conventions of 0001_initial hold.

-- The runs that wait, oldest first: the parents the sweep looks at.
CREATE INDEX runs_waiting_since ON runs (created_at, id) WHERE status = 'waiting';

-- Each run's child runs and their status: whether a waiting parent has one that ended.
CREATE INDEX runs_children ON runs (parent_run_id, status) WHERE parent_run_id IS NOT NULL;
