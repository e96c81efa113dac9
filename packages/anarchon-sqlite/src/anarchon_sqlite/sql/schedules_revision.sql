SELECT revision FROM anarchon_schedule_counter WHERE one = 1
