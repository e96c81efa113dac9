-- After a commit on this connection: the server's WAL position now (past that commit's record), and how many
-- standbys have flushed up to it. One statement, so a standby that keeps up costs one round trip.
WITH here AS (SELECT pg_current_wal_lsn() AS lsn)
SELECT here.lsn::text AS lsn,
       (SELECT count(*) FROM pg_stat_replication r WHERE r.flush_lsn >= here.lsn) AS flushed
    FROM here
