-- 0006_outcome_logs: an inbox outcome carries the ctx.logger records of its attempt
-- (a JSON array of {"level", "message", "attempt", "at"}; NULL: none), which the
-- run's driver stores as history notes with the batch that applies the outcome.  The
-- conventions of 0001_initial hold.
ALTER TABLE outcomes ADD COLUMN logs TEXT;
