"""The smallest Django settings that show the anarchon recipe; not for production as they are."""

from __future__ import annotations

import os

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "recipe-only-not-secret")
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = ["heartbeats.apps.HeartbeatsConfig", "tenants"]
MIDDLEWARE = ["django.middleware.csrf.CsrfViewMiddleware"]
ROOT_URLCONF = "site_config.urls"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ.get("DJANGO_DB", "db.sqlite3")}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
# Where tenants/views.py stores the schedules: the backend the scheduler reads (heartbeats/jobs.py).
ANARCHON_BACKEND = os.environ.get("ANARCHON_BACKEND", "sqlite:///anarchon.sqlite3")
