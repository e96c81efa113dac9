"""The entry point: one :class:`PrometheusMetrics` on the default registry for the whole process.

Loaded once per process (anarchon caches its entry points), so several
schedulers in one process count into the same metrics rather than
registering them twice.
"""

from __future__ import annotations

from ._metrics import PrometheusMetrics

metrics = PrometheusMetrics()

anarchon_run_started = metrics.anarchon_run_started
anarchon_run_ended = metrics.anarchon_run_ended
anarchon_run_finished = metrics.anarchon_run_finished
anarchon_run_taken_over = metrics.anarchon_run_taken_over
anarchon_run_handed_over = metrics.anarchon_run_handed_over
anarchon_lease_lost = metrics.anarchon_lease_lost
anarchon_claims_decided = metrics.anarchon_claims_decided
anarchon_slot_skipped = metrics.anarchon_slot_skipped
anarchon_backend_error = metrics.anarchon_backend_error
anarchon_clock_checked = metrics.anarchon_clock_checked
