"""A cell's bounded per-chunk figures (its results file) against the exact ones from its JSONL (every chunk).

    python benchmarks/bounded_vs_exact.py RESULTS.json RESULTS.requests.jsonl

Prints, for `itl_s` and `steps.step_itl_s`, the results file's figure, the exact figure over every measured ok
record of the JSONL (`stats.weighted_distribution` of their `itl_pairs`, `stats.distribution` of their step
gaps) and the relative difference; beyond 65,536 values it is within 0.1 % (docs/definitions.md).
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadgen.files import read_jsonl  # noqa: E402
from loadgen.metrics.request import itl_pairs  # noqa: E402
from loadgen.metrics.stats import distribution, weighted_distribution  # noqa: E402
from loadgen.metrics.steps import step_groups  # noqa: E402
from loadgen.names import Phase  # noqa: E402
from loadgen.record import Record  # noqa: E402


def main() -> None:
    res, jsonl = sys.argv[1], sys.argv[2]
    cell = json.load(open(res))["cells"][0]
    recs = [Record.from_dict(d) for d in read_jsonl(jsonl)]
    ok = [r for r in recs if r.phase == Phase.MEASURE and r.ok]
    v, w = [], []
    for r in ok:
        a, b = itl_pairs(r)
        v += a
        w += b
    exact_itl = weighted_distribution(v, w)
    gaps = [g / 1e9 for r in ok for g in step_groups(r)[1]]
    exact_step = distribution(gaps, (50, 99))
    print(f"records {len(ok)}, ITL pairs {len(v)}, step gaps {len(gaps)}")
    for name, got, want in (("itl_s", cell["itl_s"], exact_itl), ("step_itl_s", cell["steps"]["step_itl_s"], exact_step)):
        for k in want:
            g, x = got[k], want[k]
            rel = (g - x) / x if x else 0.0
            print(f"{name:>10} {k:>7}: bounded {g:.9g}  exact {x:.9g}  rel diff {rel:+.2e}")


if __name__ == "__main__":
    main()
