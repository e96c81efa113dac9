-- Which standbys stream from this server (min_replicas="auto"), and this server's history: its timeline,
-- the first 8 hex digits of the current WAL file's name (a promoted standby starts a new one).
-- A role without pg_read_all_stats sees each row with its state (and positions) NULL: counted in `hidden`.
-- A standby that just connected streams with flush_lsn NULL until its first reply: not hidden.
SELECT count(*) FILTER (WHERE state = 'streaming') AS streaming,
       count(*) FILTER (WHERE state IS NULL) AS hidden,
       substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS timeline
    FROM pg_stat_replication
