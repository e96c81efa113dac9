SELECT mark, fencing, kept FROM anarchon_jobs WHERE job = ?
