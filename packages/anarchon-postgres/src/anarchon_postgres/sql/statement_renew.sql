-- Renew the leases still ours (same token, running, not handed over), row by row by primary key
-- (migration_6.sql says why); the renewed ones come back.
SELECT o_job, o_slot, o_manual, o_token FROM @schema@.renew_many($1::text[], $2::bigint[], $3::boolean[], $4::text[])
