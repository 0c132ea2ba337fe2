"""The wire's fuzzers, run long: the differential HTTP/1.1 fuzzer (loadgen's client against h11,
tests/test_h1_fuzz.py), the SSE parser against the WHATWG algorithm (tests/test_sse_spec.py) and the event
template against the full parse (tests/test_event_template.py; read straight from chunked bodies:
tests/test_chunked_template.py).

    python benchmarks/fuzz_wire.py [--examples 20000] [--seed N]

The unit tier runs each property with 300 examples; this runs them with `--examples` each (WIRE_FUZZ_EXAMPLES)
through pytest, without hypothesis's example database so that every run explores afresh, and prints the time it
took. A failure prints hypothesis's minimised example: add it to the file's "what the fuzzer found" table.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ["tests/test_h1_fuzz.py", "tests/test_sse_spec.py", "tests/test_event_template.py",
         "tests/test_chunked_template.py"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", type=int, default=20000, help="examples per property (default %(default)s)")
    p.add_argument("--seed", help="hypothesis seed, to repeat a run")
    args = p.parse_args()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *FILES,
           "-k", "not what_the_fuzzer_found"]
    if args.seed:
        cmd.append(f"--hypothesis-seed={args.seed}")
    env = {**os.environ, "WIRE_FUZZ_EXAMPLES": str(args.examples)}
    t0 = time.monotonic()
    rc = subprocess.call(cmd, cwd=ROOT, env=env)
    print(f"fuzz_wire: {args.examples} examples per property, {time.monotonic() - t0:.0f} s, exit {rc}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
