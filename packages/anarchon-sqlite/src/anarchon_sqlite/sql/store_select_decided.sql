WITH k(job, slot) AS (VALUES {placeholders}) SELECT r.job, r.slot_ms, r.token FROM k JOIN anarchon_runs AS r ON r.job = k.job AND r.slot_ms = k.slot AND r.manual = 0
