-- One claim (the usual call) as scalars: asyncpg encodes them far cheaper than arrays.
SELECT * FROM @schema@.claim(ARRAY[$1::text], ARRAY[$2::bigint], ARRAY[$3::boolean],
    ARRAY[$4::text], ARRAY[$5::text], ARRAY[$6::timestamptz], ARRAY[$7::boolean], ARRAY[$8::integer],
    ARRAY[$9::bigint], ARRAY[$10::boolean], ARRAY[$11::bigint], ARRAY[$12::bigint])
