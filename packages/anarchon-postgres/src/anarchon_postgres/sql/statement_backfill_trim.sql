-- History trimmed as a claim trims it: $1 job, $2 run_count, $3 history_size, $4 history_ttl_ms.
SELECT @schema@.trim_history($1, $2, $3, $4, @schema@.now_ms())
