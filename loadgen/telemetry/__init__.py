"""Telemetry sources sampled during each cell and cut to the cell's window (see `base.TelemetrySource`)."""
