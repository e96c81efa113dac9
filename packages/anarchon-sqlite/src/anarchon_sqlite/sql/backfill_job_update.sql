UPDATE anarchon_jobs SET mark = ?, fencing = ?, kept = ? WHERE job = ?
