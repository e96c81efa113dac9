"""The fault suite: many instances, killed processes, cut connections, restarted brokers, skewed clocks."""
