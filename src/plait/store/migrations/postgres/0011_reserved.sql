-- 0011_reserved: stands for a migration of another line of work with this number; it
-- changes nothing.  Migrations are applied in order without a gap.
SELECT 1;
