-- What this server promises: its role, the settings that make a commit durable, and the standbys streaming from it.
-- A role without pg_read_all_stats sees pg_stat_replication's rows with state, sync_state and flush_lsn NULL:
-- counted in neither column but `hidden` (min_replicas cannot wait on a standby this role cannot read).
SELECT pg_is_in_recovery() AS recovering,
       current_setting('fsync') AS fsync,
       current_setting('full_page_writes') AS full_page_writes,
       current_setting('synchronous_commit') AS commit,
       current_setting('synchronous_standby_names') AS names,
       (SELECT count(*) FROM pg_stat_replication) AS standbys,
       (SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'async') AS async,
       (SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')) AS sync,
       (SELECT count(*) FROM pg_stat_replication WHERE state IS NULL) AS hidden
