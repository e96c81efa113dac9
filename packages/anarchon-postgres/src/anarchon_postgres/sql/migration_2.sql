DROP FUNCTION @schema@.claim(
    text[], bigint[], boolean[], text[], text[], timestamptz[], boolean[], integer[], bigint[],
    boolean[], bigint[], bigint[]
);

-- @include claim_function.sql
