"""Metrics (Prometheus), structured JSON logs and the request middleware.

Every metric lives in `metrics`; label values come only from closed
vocabularies (registered tools and owners, statuses, reasons, route
templates), never from keys, run ids or caller strings. Every log line passes
through one redacting formatter in `logging`.
"""
