UPDATE anarchon_pauses SET until_ms = ? WHERE job = ?
