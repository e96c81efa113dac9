SELECT mark, kept FROM anarchon_jobs WHERE job = ?
