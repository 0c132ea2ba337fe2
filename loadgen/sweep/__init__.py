"""`loadgen sweep FILE.toml`: reconfigure the server per configuration, prove readiness, measure the matrix,
resume where a killed sweep stopped. Format reference: docs/sweep.md."""
