SELECT instance, alive_until FROM anarchon_instances
