SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'anarchon_meta'
