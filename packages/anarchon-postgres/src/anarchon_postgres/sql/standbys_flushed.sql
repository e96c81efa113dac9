-- How many standbys have flushed the WAL up to $1 (a pg_lsn as text).
SELECT count(*) FROM pg_stat_replication WHERE flush_lsn >= $1::text::pg_lsn
