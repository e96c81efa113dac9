SELECT instance, jobs FROM anarchon_registry WHERE instance IN (SELECT value FROM json_each(?1))
