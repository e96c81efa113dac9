-- Which standbys stream from this server (min_replicas="auto"), and this server's history: its timeline,
-- the first 8 hex digits of the current WAL file's name (a promoted standby starts a new one).
-- A role without pg_read_all_stats sees flush_lsn NULL: counted in `streaming`, not in `readable`.
SELECT count(*) AS streaming,
       count(flush_lsn) AS readable,
       substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) AS timeline
    FROM pg_stat_replication WHERE state = 'streaming'
