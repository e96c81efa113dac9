SELECT record, revision FROM @schema@.schedules WHERE name = $1
