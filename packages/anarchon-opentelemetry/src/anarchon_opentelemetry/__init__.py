"""OpenTelemetry for anarchon, as an observer plugin: spans and metrics on opentelemetry-api.

Installed, it registers itself through the ``anarchon`` entry point on the
global tracer and meter providers, which do nothing until the application
configures the OpenTelemetry SDK (or an auto-instrumentation agent does). To
use providers of your own, block the entry point
(``ANARCHON_DISABLE_PLUGINS=opentelemetry``) and pass
``Scheduler(plugins=[OpenTelemetryObserver(tracer_provider=..., meter_provider=...)])``.
"""

from __future__ import annotations

from ._observer import OpenTelemetryObserver

__all__ = ["OpenTelemetryObserver"]
