-- Scheduled claims of distinct jobs, set-based: p_wait, then claim()'s arrays less `manual`.
SELECT * FROM @schema@.claim_batch($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
