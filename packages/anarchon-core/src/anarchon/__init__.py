"""anarchon: distributed cron (bootstrap stub, replaced by the lead)."""
