-- PostgresBackend.places(): the leaves ($1-$5) and the asks ($6-$11), one array
-- per field; one row per ask, in order: whether its entry holds a place
-- (places_function.sql, migration 15).
SELECT o_n, o_running FROM @schema@.places($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
