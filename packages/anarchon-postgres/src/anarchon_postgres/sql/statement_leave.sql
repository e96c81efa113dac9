-- A clean stop: this instance's record expires now, so what it leaves running is taken over at once.
UPDATE @schema@.instances SET alive_until = least(alive_until, @now_ms@ - 1) WHERE instance = $1
