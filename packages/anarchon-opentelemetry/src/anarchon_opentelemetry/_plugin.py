"""The entry point: one observer on the global providers for the whole process."""

from __future__ import annotations

from ._observer import OpenTelemetryObserver

observer = OpenTelemetryObserver()

anarchon_run_started = observer.anarchon_run_started
anarchon_run_ended = observer.anarchon_run_ended
anarchon_run_finished = observer.anarchon_run_finished
anarchon_run_taken_over = observer.anarchon_run_taken_over
anarchon_run_handed_over = observer.anarchon_run_handed_over
anarchon_claims_decided = observer.anarchon_claims_decided
anarchon_slot_skipped = observer.anarchon_slot_skipped
anarchon_backend_error = observer.anarchon_backend_error
anarchon_clock_checked = observer.anarchon_clock_checked
