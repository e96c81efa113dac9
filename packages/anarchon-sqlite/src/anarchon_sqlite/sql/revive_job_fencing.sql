UPDATE anarchon_jobs SET fencing = ? WHERE job = ?
