SELECT instance, jobs FROM @schema@.registry WHERE instance = ANY($1::text[])
