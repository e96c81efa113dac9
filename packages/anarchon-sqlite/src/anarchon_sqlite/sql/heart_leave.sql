UPDATE anarchon_instances SET alive_until = MIN(alive_until, ?2) WHERE instance = ?1
