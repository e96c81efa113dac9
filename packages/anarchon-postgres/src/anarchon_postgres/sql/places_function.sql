-- One call of PostgresBackend.places(), in one transaction: the leaves ($1-$5,
-- one array per field), then the asks ($6-$11), then each asked group's turn;
-- one row per ask, in order, saying whether its entry holds a place. The rule
-- is anarchon.backend.Backend.places's docstring, and the answers are those of
-- the reference, anarchon._memory_groups.MemoryGroups.places.
--
-- Every group named is locked first (a transaction-scoped advisory lock: the
-- places table's oid and the group name's hash), in byte order for every
-- caller, so calls sharing groups queue up instead of deadlocking, and each
-- statement after the locks reads what the calls before committed (READ
-- COMMITTED: a fresh snapshot per statement). A hash shared by two groups
-- only makes their calls queue. Nothing else writes group_places: a set
-- limit is read by the next call, and the heartbeat's records are only read.
-- A place left is notified on the schema's groups channel (at commit).
--
-- Dead holders (no heartbeat record, or one that expired while some record
-- is alive: the silence rule of the claims, migration 14) lose their entries
-- in each asked group: the group's distinct holders are found by a skip scan
-- of group_places_holder, one probe each, so a long queue of waiting entries
-- is not read. Then the group's free places (its limit, less the entries
-- running) go to its first waiting entries in turn, read from
-- group_places_turn; a group without a limit admits every waiting entry.
CREATE OR REPLACE FUNCTION @schema@.places(
    l_group text[], l_job text[], l_slot bigint[], l_manual boolean[], l_token text[],
    p_group text[], p_job text[], p_slot bigint[], p_manual boolean[], p_token text[], p_instance text[]
) RETURNS TABLE (o_n integer, o_running boolean) LANGUAGE plpgsql AS $fn$
DECLARE
    v_class integer := '@schema@.group_places'::regclass::oid::integer;
    v_group text;
    v_left bigint;
    v_now bigint;
    v_alive boolean;
    v_dead text[];
    v_limit integer;
    v_free bigint;
BEGIN
    FOR v_group IN SELECT DISTINCT g COLLATE "C" FROM unnest(l_group || p_group) AS u(g) ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(v_class, hashtext(v_group));
    END LOOP;

    -- Leaves: an entry goes only with its own token (a stale leave frees nothing).
    DELETE FROM @schema@.group_places p
        USING unnest(l_group, l_job, l_slot, l_manual, l_token) AS l(g, j, s, m, t)
        WHERE p.group_name = l.g AND p.job = l.j AND p.slot_ms = l.s AND p.manual = l.m AND p.token = l.t;
    GET DIAGNOSTICS v_left = ROW_COUNT;
    IF v_left > 0 THEN
        PERFORM pg_notify(@groups@, '');
    END IF;

    -- Asks: an entry with another token (a take-over's) is replaced and waits again; a key
    -- asked twice here with two tokens ends as the reference leaves it, waiting, the last one's.
    WITH a AS (
        SELECT g, j, s, m, t, i, n
        FROM unnest(p_group, p_job, p_slot, p_manual, p_token, p_instance) WITH ORDINALITY AS u(g, j, s, m, t, i, n)
    ), k AS (
        SELECT g, j, s, m, (array_agg(t ORDER BY n DESC))[1] AS t, (array_agg(i ORDER BY n DESC))[1] AS i,
               count(DISTINCT t) > 1 AS many
        FROM a GROUP BY g, j, s, m
    )
    UPDATE @schema@.group_places p SET token = k.t, instance = k.i, running = false
        FROM k
        WHERE p.group_name = k.g AND p.job = k.j AND p.slot_ms = k.s AND p.manual = k.m
          AND (p.token <> k.t OR k.many);
    INSERT INTO @schema@.group_places (group_name, job, slot_ms, manual, token, instance, running)
        SELECT DISTINCT ON (g, j, s, m) g, j, s, m, t, i, false
        FROM unnest(p_group, p_job, p_slot, p_manual, p_token, p_instance) WITH ORDINALITY AS u(g, j, s, m, t, i, n)
        ORDER BY g, j, s, m, n DESC
        ON CONFLICT (group_name, job, slot_ms, manual) DO NOTHING;

    v_now := @now_ms@;
    v_alive := EXISTS (SELECT 1 FROM @schema@.instances WHERE alive_until >= v_now);
    FOR v_group IN SELECT DISTINCT g COLLATE "C" FROM unnest(p_group) AS u(g) ORDER BY 1 LOOP
        WITH RECURSIVE h(instance) AS (
            (SELECT x.instance FROM @schema@.group_places x WHERE x.group_name = v_group ORDER BY x.instance LIMIT 1)
            UNION ALL
            SELECT (
                SELECT x.instance FROM @schema@.group_places x
                WHERE x.group_name = v_group AND x.instance > h.instance ORDER BY x.instance LIMIT 1
            ) FROM h WHERE h.instance IS NOT NULL
        )
        SELECT array_agg(h.instance) INTO v_dead
        FROM h LEFT JOIN @schema@.instances hb ON hb.instance = h.instance
        WHERE h.instance IS NOT NULL AND (hb.instance IS NULL OR (hb.alive_until < v_now AND v_alive));
        IF v_dead IS NOT NULL THEN
            DELETE FROM @schema@.group_places WHERE group_name = v_group AND instance = ANY (v_dead);
        END IF;

        SELECT max_running INTO v_limit FROM @schema@.group_limits WHERE group_name = v_group;
        IF NOT FOUND THEN
            UPDATE @schema@.group_places SET running = true WHERE group_name = v_group AND NOT running;
        ELSE
            SELECT v_limit - count(*) INTO v_free FROM @schema@.group_places WHERE group_name = v_group AND running;
            IF v_free > 0 THEN
                UPDATE @schema@.group_places p SET running = true
                    FROM (
                        SELECT w.job, w.slot_ms, w.manual FROM @schema@.group_places w
                        WHERE w.group_name = v_group AND NOT w.running
                        ORDER BY w.slot_ms, w.job, w.manual LIMIT v_free
                    ) f
                    WHERE p.group_name = v_group AND p.job = f.job AND p.slot_ms = f.slot_ms AND p.manual = f.manual;
            END IF;
        END IF;
    END LOOP;

    RETURN QUERY
        SELECT a.n::integer, coalesce(p.running, false)
        FROM unnest(p_group, p_job, p_slot, p_manual) WITH ORDINALITY AS a(g, j, s, m, n)
        LEFT JOIN @schema@.group_places p
            ON p.group_name = a.g AND p.job = a.j AND p.slot_ms = a.s AND p.manual = a.m
        ORDER BY a.n;
END
$fn$;
