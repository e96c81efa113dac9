-- Version 12: every attempt of a slot (anarchon.run.Attempt). A take-over after
-- the runner died rewrites the slot's record for the new runner; the record now
-- keeps the attempt it replaces in earlier, a jsonb list, oldest first, of
-- {attempt, instance, fencing, started_at}: NULL for a slot never taken over.
-- A finish and an abandon leave it as it is. A nullable column without a
-- default rewrites no row. The take_over function is replaced in place (same
-- arguments, same result): an instance of an older release calls it as before,
-- so its take-overs keep the attempts too, and it never names the column.
ALTER TABLE @schema@.runs ADD COLUMN earlier jsonb NULL;

-- @include take_over_function.sql
