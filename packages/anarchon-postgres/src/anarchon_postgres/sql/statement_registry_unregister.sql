DELETE FROM @schema@.registry WHERE instance = $1
