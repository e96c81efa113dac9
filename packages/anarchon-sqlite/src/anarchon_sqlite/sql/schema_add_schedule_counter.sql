CREATE TABLE IF NOT EXISTS anarchon_schedule_counter (one INTEGER PRIMARY KEY CHECK (one = 1), revision INTEGER NOT NULL)
