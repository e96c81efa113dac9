-- What changed after revision $1, tombstones included, by the revision index.
SELECT name, record, revision FROM @schema@.schedules WHERE revision > $1 ORDER BY revision
