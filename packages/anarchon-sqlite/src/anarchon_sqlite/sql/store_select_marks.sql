SELECT job, mark FROM anarchon_jobs WHERE job IN ({placeholders})
