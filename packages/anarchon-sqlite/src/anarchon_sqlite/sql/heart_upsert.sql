INSERT INTO anarchon_instances (instance, alive_until) VALUES (?1, ?2) ON CONFLICT (instance) DO UPDATE SET alive_until = excluded.alive_until
