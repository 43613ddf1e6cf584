-- 0006_reserved: a placeholder on the observe branch for the migration another branch
-- adds with this number (migrations are numbered without gaps).  When merging, DELETE
-- this file in favour of the real 0006.
SELECT 1;
