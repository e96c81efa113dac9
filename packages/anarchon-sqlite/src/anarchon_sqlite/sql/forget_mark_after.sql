SELECT 1 FROM anarchon_jobs WHERE job = ?1 AND mark > ?2
