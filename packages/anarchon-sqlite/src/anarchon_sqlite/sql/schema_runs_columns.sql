SELECT name FROM pragma_table_info('anarchon_runs')
