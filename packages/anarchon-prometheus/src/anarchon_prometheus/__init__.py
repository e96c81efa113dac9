"""Prometheus metrics for anarchon, as an observer plugin.

Installed, it registers itself through the ``anarchon`` entry point and
counts into prometheus-client's default registry, so every scheduler of the
process is measured. Serve the registry the usual ways::

    from prometheus_client import start_http_server
    start_http_server(9464)          # or mount prometheus_client.make_asgi_app()

For another registry, block the entry point (``ANARCHON_DISABLE_PLUGINS=prometheus``)
and pass ``Scheduler(plugins=[PrometheusMetrics(registry=my_registry)])``.
"""

from __future__ import annotations

from ._metrics import DEFAULT_MAX_JOBS, OTHER_JOBS, PrometheusMetrics

__all__ = ["DEFAULT_MAX_JOBS", "OTHER_JOBS", "PrometheusMetrics"]
