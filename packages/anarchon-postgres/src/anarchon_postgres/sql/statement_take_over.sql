-- Grant again, or abandon, the expired runs of these jobs (jobs, max_attempts, leases, instance).
SELECT * FROM @schema@.take_over($1, $2, $3, $4)
