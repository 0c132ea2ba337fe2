"""`loadgen search --slo …`: the highest load that meets a latency SLO (docs/search.md). Its settings and probes
(`probes.py`), the pure walk over the cells (`walk.py`), what its answer rests on (`caveats.py`), where it stands
for the live watchers (`state.py`), the results' `search` part (`result.py`), what it says (`text.py`) and the
plan that hands the walk's cells to the runner (`plan.py`)."""
