-- Every stored schedule (an instance's first read, or one that fell behind): tombstones left out.
SELECT name, record, revision FROM @schema@.schedules WHERE record IS NOT NULL ORDER BY revision
