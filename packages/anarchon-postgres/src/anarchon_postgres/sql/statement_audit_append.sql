-- One entry ($1 job, $2 entry); entries more than $3 below it are trimmed in the same statement
-- (one range delete on the primary key). The new id is the answer.
WITH added AS (
    INSERT INTO @schema@.audit (job, entry) VALUES ($1, $2) RETURNING id
), trimmed AS (
    DELETE FROM @schema@.audit d USING added WHERE d.id <= added.id - $3
)
SELECT id FROM added
