INSERT INTO anarchon_schedule_counter (one, revision) VALUES (1, ?1) ON CONFLICT (one) DO UPDATE SET revision = excluded.revision
