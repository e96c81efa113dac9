DELETE FROM anarchon_places WHERE group_name = ?1 AND job = ?2 AND slot_ms = ?3 AND manual = ?4 AND token = ?5
