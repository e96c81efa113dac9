DELETE FROM anarchon_jobs WHERE job = ?1
