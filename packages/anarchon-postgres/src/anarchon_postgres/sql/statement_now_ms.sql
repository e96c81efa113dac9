-- The server's clock in epoch milliseconds.
SELECT @now_ms@
