SELECT id, entry FROM @schema@.audit WHERE job = $3 AND id < $1 ORDER BY id DESC LIMIT $2
