"""`--verify` (docs/verify.md): whether outputs stay right under load. Its inputs, read before any load: the
prompts (`prompts.py`) and the reference their outputs are judged against (`reference.py`, answered at the run's
start or saved by another run); the run's side (`verifier.py`): the reference answered, each cell's verification
jobs and their sender, the records handed to the builder. The request is the client's
(`client/verify_request.py`), the formulas `metrics/correctness.py`, the cell's part `results/correctness.py`."""
