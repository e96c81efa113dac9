INSERT INTO anarchon_group_limits (group_name, max_running) VALUES (?1, ?2) ON CONFLICT (group_name) DO UPDATE SET max_running = excluded.max_running
