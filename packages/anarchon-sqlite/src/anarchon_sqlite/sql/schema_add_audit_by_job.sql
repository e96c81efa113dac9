CREATE INDEX IF NOT EXISTS anarchon_audit_by_job ON anarchon_audit (job, id)
