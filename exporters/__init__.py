"""Exporters at the edge of the data flow: they consume records and summaries, never the client's internals.

`exporters.live.LiveExporter` serves loadgen's own metrics to Prometheus while a run goes on (docs/metrics.md).
"""
