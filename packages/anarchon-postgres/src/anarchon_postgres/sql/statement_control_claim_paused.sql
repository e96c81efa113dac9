-- Paused jobs' scheduled claims as arrays: the claim_paused function's ten parameters.
SELECT o_n, o_outcome FROM @schema@.claim_paused($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
