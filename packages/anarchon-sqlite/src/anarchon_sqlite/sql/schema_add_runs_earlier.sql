ALTER TABLE anarchon_runs ADD COLUMN earlier TEXT
