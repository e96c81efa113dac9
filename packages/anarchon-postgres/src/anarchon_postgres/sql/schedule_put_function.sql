-- Store (p_record) or remove (NULL) schedule p_name if its revision is p_expect
-- (NULL: any; 0: absent or removed). o_revision is the new revision, NULL when
-- refused; o_current is the schedule's revision as found. Under the counter
-- row's lock: tombstones older than p_tombstone_ms go with their logs (also
-- when the change is refused), then the check, the counter, the row and the
-- log entry, the log trimmed to its last p_log_keep entries. p_retry: the
-- call is sent again after its connection died, so a change found already
-- stored (same record, the log's last entry this change) is answered as made.
-- A change is notified on the schema's channel (@channel@), payload its
-- revision: PostgreSQL sends it at commit, so never for a refused or rolled
-- back change, and each instance's LISTEN wakes its poll at once (migration 10).
CREATE OR REPLACE FUNCTION @schema@.put_schedule(
    p_name text, p_record text, p_expect bigint, p_change text, p_tombstone_ms bigint, p_log_keep integer,
    p_retry boolean
) RETURNS TABLE (o_revision bigint, o_current bigint) LANGUAGE plpgsql AS $fn$
DECLARE
    v_counter bigint;
    v_now bigint;
    v_record text;
    v_revision bigint;
    v_last text;
BEGIN
    SELECT revision INTO v_counter FROM @schema@.schedule_counter WHERE one FOR UPDATE;
    v_now := @now_ms@;
    WITH gone AS (
        DELETE FROM @schema@.schedules WHERE record IS NULL AND changed_ms < v_now - p_tombstone_ms RETURNING name
    )
    DELETE FROM @schema@.schedule_log l USING gone WHERE l.name = gone.name;
    SELECT record, revision INTO v_record, v_revision FROM @schema@.schedules WHERE name = p_name;
    IF p_retry AND FOUND AND v_record IS NOT DISTINCT FROM p_record THEN
        SELECT change INTO v_last FROM @schema@.schedule_log WHERE name = p_name AND revision = v_revision;
        IF v_last = p_change THEN
            o_revision := v_revision;
            o_current := v_revision;
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;
    o_current := CASE WHEN v_record IS NULL THEN 0 ELSE v_revision END;
    IF (p_expect IS NOT NULL AND p_expect <> o_current) OR (p_record IS NULL AND o_current = 0) THEN
        o_revision := NULL;
        RETURN NEXT;
        RETURN;
    END IF;
    v_counter := v_counter + 1;
    UPDATE @schema@.schedule_counter SET revision = v_counter WHERE one;
    INSERT INTO @schema@.schedules (name, record, revision, changed_ms) VALUES (p_name, p_record, v_counter, v_now)
        ON CONFLICT (name) DO UPDATE
        SET record = excluded.record, revision = excluded.revision, changed_ms = excluded.changed_ms;
    INSERT INTO @schema@.schedule_log (name, revision, change) VALUES (p_name, v_counter, p_change);
    DELETE FROM @schema@.schedule_log WHERE name = p_name AND revision <= (
        SELECT revision FROM @schema@.schedule_log WHERE name = p_name
        ORDER BY revision DESC OFFSET p_log_keep LIMIT 1
    );
    PERFORM pg_notify(@channel@, v_counter::text);
    o_revision := v_counter;
    RETURN NEXT;
END
$fn$;
