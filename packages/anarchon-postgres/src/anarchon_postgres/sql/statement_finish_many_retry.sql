-- The retry of finish_many.sql: a record this batch already wrote counts as finished.
SELECT o_job, o_slot, o_manual, o_token FROM @schema@.finish_many(true,
    $1::text[], $2::bigint[], $3::boolean[], $4::text[], $5::text[], $6::text[], $7::integer[], $8::bigint[],
    $9::boolean[], $10::integer[], $11::timestamptz[], $12::timestamptz[], $13::bigint[], $14::text[])
