-- Keep this instance's entry ($1) live until the server's now + $2 ms; a deleted entry stays deleted.
UPDATE @schema@.registry SET expires_ms = @now_ms@ + $2 WHERE instance = $1
