CREATE INDEX anarchon_runs_running ON anarchon_runs (job, expires_ms) WHERE status = 'running'
