SELECT revision, change FROM @schema@.schedule_log WHERE name = $1 ORDER BY revision
