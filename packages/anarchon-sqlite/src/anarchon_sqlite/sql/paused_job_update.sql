UPDATE anarchon_jobs SET mark = ?, kept = ? WHERE job = ?
