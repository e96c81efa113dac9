-- Group $1's limit set to $2, or removed when $2 is NULL (no limit), and the
-- change notified on the schema's groups channel at commit (capability
-- group_notify): the instances waiting for places ask again at once.
WITH gone AS (
    DELETE FROM @schema@.group_limits WHERE group_name = $1 AND $2::integer IS NULL
), kept AS (
    INSERT INTO @schema@.group_limits (group_name, max_running)
    SELECT $1, $2::integer WHERE $2::integer IS NOT NULL
    ON CONFLICT (group_name) DO UPDATE SET max_running = excluded.max_running
)
SELECT pg_notify(@groups@, '')
