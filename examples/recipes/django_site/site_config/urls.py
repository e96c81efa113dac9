from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.urls import path
from heartbeats.models import Heartbeat
from tenants.views import report_schedule


def latest(request: HttpRequest) -> JsonResponse:
    beats = Heartbeat.objects.order_by("-slot_ms")[:10]
    return JsonResponse({"heartbeats": [{"slot_ms": b.slot_ms, "instance": b.instance} for b in beats]})


urlpatterns = [
    path("heartbeats/", latest),
    path("tenants/<str:tenant>/report-schedule", report_schedule),
]
