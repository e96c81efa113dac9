-- The job row's lock, taken first, as the claim function takes it.
SELECT 1 FROM @schema@.jobs WHERE name = $1 FOR UPDATE
