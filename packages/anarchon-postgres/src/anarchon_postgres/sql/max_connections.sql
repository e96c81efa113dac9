-- The server's connection limit, read at start for the message a full server gets (any role may read it).
SELECT current_setting('max_connections')::int
