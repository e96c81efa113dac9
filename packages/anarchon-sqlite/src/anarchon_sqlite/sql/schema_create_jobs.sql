CREATE TABLE anarchon_jobs (
        job TEXT PRIMARY KEY,
        mark INTEGER,
        won INTEGER,
        fencing INTEGER NOT NULL DEFAULT 0,
        kept INTEGER NOT NULL DEFAULT 0
    )
