-- Many finishes in one call (one commit): element i of each array is finish i's $1-$14 of finish.sql.
-- Row by row by primary key (migration_6.sql says why); the finishes that wrote their record come back.
SELECT o_job, o_slot, o_manual, o_token FROM @schema@.finish_many(false,
    $1::text[], $2::bigint[], $3::boolean[], $4::text[], $5::text[], $6::text[], $7::integer[], $8::bigint[],
    $9::boolean[], $10::integer[], $11::timestamptz[], $12::timestamptz[], $13::bigint[], $14::text[])
