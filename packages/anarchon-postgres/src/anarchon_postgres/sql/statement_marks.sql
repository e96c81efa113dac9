-- Each job's newest decided scheduled slot.
SELECT name, mark FROM @schema@.jobs WHERE name = ANY ($1::text[])
