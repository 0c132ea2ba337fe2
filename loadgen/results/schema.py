"""The names of the files loadgen writes (DESIGN.md §4): one place for each schema string."""

RESULTS_SCHEMA = "loadgen.results/v1"
SWEEP_SCHEMA = "loadgen.sweep/v1"
TUNE_SCHEMA = "loadgen.tune/v1"
