-- Version 3: fleet scale. Three instances claiming the same 1,000 slots each
-- second queued on each other's row locks in the claim function of version 2
-- (every batch locked every job row in name order, then decided claim by
-- claim), so the losers' wait was the winner's whole batch, and batches of
-- later seconds queued behind it. claim_batch decides the scheduled claims of
-- a batch set-based, and a claim it can tell is lost costs no lock at all.
-- The claim function of version 2 stays for lone claims, manual runs and the
-- rare cases claim_batch hands back, and for instances of older releases.

-- Each claim rewrites its job's row. With room left on every page the new
-- version goes on the same page (a HOT update, no index entry), and the page
-- is pruned on the next visit, so the table keeps its size without VACUUM.
ALTER TABLE @schema@.jobs SET (fillfactor = 25);

-- @include claim_batch_function.sql
