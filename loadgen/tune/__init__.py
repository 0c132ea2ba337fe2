"""`loadgen tune FILE.toml`: the best server configuration at each load, measured where the answer is still open
(docs/tune.md). A sweep file with a `[tune]` table; every configuration is brought up and measured by the
sweep's own parts (`loadgen.sweep`)."""
