-- Claims as arrays, one element per claim: the claim function's twelve parameters.
SELECT * FROM @schema@.claim($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
