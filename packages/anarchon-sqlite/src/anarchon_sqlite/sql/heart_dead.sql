SELECT instance, alive_until FROM anarchon_instances WHERE alive_until < ?1
