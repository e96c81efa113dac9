-- A pause, a resume or a run request of job $1 was committed: tell the instances
-- listening on the schema's control channel (capability control_notify).
SELECT pg_notify(@control@, $1)
