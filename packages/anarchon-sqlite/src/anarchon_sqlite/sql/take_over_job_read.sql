SELECT won, fencing FROM anarchon_jobs WHERE job = ?
