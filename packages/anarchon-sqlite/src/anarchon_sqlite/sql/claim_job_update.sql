UPDATE anarchon_jobs SET mark = ?, won = ?, fencing = ?, kept = ? WHERE job = ?
