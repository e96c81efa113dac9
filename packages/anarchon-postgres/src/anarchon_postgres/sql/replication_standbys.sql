-- The standbys streaming from this server, asynchronous and synchronous, and the settings that decide it.
SELECT count(*) FILTER (WHERE sync_state = 'async') AS async,
       count(*) FILTER (WHERE sync_state IN ('sync', 'quorum')) AS sync,
       current_setting('synchronous_standby_names') AS names,
       current_setting('synchronous_commit') AS commit
FROM pg_stat_replication
