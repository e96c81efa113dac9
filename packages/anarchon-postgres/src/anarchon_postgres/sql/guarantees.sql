-- What this server promises: its role, the settings that make a commit durable, and the standbys streaming from it.
-- A role without pg_read_all_stats sees pg_stat_replication's rows with sync_state and flush_lsn NULL: counted in
-- neither column, nor in `readable` (how many standbys' flush positions this role reads: min_replicas waits on them).
SELECT pg_is_in_recovery() AS recovering,
       current_setting('fsync') AS fsync,
       current_setting('full_page_writes') AS full_page_writes,
       current_setting('synchronous_commit') AS commit,
       current_setting('synchronous_standby_names') AS names,
       (SELECT count(*) FROM pg_stat_replication) AS standbys,
       (SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'async') AS async,
       (SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')) AS sync,
       (SELECT count(flush_lsn) FROM pg_stat_replication) AS readable
