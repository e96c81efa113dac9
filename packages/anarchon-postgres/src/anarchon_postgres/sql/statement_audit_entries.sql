SELECT id, entry FROM @schema@.audit WHERE id < $1 ORDER BY id DESC LIMIT $2
