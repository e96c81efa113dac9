DELETE FROM anarchon_instances WHERE alive_until < ?1
