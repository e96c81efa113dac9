-- Version 13: ranked claims. claim() and claim_batch() notify each scheduled
-- slot they record on the schema's decided channel ("<job> <slot>", at
-- commit), so an instance ranked later for the slot sends no claim for it.
-- Both are replaced in place (same arguments, same results): an instance of
-- an older release calls them as before, and its claims are told too.
-- @include claim_function.sql

-- @include claim_batch_function.sql
