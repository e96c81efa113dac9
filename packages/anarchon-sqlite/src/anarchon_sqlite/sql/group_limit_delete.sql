DELETE FROM anarchon_group_limits WHERE group_name = ?1
