-- A won backfill counts as any won claim: fencing and run_count move, mark rises to the slot if below it.
UPDATE @schema@.jobs SET fencing = fencing + 1, run_count = run_count + 1, mark = GREATEST(mark, $2)
WHERE name = $1 RETURNING fencing, run_count
