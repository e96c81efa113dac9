SELECT name FROM sqlite_master WHERE type IN ('table', 'index')
