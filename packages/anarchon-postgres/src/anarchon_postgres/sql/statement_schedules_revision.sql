-- The counter: one row by primary key, read by every instance every poll.
SELECT revision FROM @schema@.schedule_counter WHERE one
