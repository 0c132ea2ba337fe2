"""Instructions a content chunk of loadgen's client beside the raw reader's, counted by callgrind: the figure a
shared machine cannot blur.

    python benchmarks/client_instructions.py [--concurrency 32,128] [--seconds 10] [--tree DIR ...] [--sim]

The fast SSE server (burst mode, 128 events a response) runs natively in its own process; each client runs under
`valgrind --tool=callgrind` with counting off, warms up for half a second, then counts the instructions of a
closed loop of `concurrency` streams for `--seconds` (`callgrind_control -i on/off` around it) and divides by the
content chunks it received. Under valgrind the client is ~50× slower than the server, so its reads hold whole
answers: the burst case where the client is the bottleneck. Each `--tree` (a clean copy of another commit, e.g.
`git archive <commit> | tar -x -C DIR`) is measured beside this one. Instructions are not time (cache misses,
allocation), but a change that removes work removes them, and they repeat to a few per mille from run to run.

`--sim` also simulates the caches and the branch predictor (valgrind's models, ~2× slower) and prints, a chunk,
the instruction-cache misses and the mispredicted indirect branches (the interpreter's dispatch): where the
instructions are equal and the time is not, code that runs cold is what differs. Run it with the interpreter to
judge (an optimized build: docs/performance.md, *Why the hosts differ*): the clients run under `sys.executable`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child(tree: str, name: str, c: int, seconds: float, url: str) -> None:
    """In the process valgrind runs: one client's measured loop, counting on only around it."""
    sys.path[:0] = [str(Path(tree) / "benchmarks"), tree]
    import client_overhead as co

    async def main() -> None:
        client = await co.CLIENTS[name](url, c)
        await client.run(c, 0.5)
        subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], capture_output=True, check=False)
        tally = await client.run(c, seconds)
        subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], capture_output=True, check=False)
        await client.close()
        print(f"chunks {tally.chunks} failed {tally.failed}", file=sys.stderr)

    asyncio.run(main())


def measure(tree: str, name: str, c: int, seconds: float, url: str, sim: bool = False) -> dict[str, float]:
    """Callgrind's counts a content chunk of one client, by event name (`Ir`: instructions; with `sim`, also
    `I1mr`, instruction-cache misses, and `Bim`, mispredicted indirect branches, among others)."""
    with tempfile.TemporaryDirectory() as out:
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}/cg.out",
               *(["--cache-sim=yes", "--branch-sim=yes"] if sim else []),
               sys.executable, __file__, "--child", tree, name, str(c), str(seconds), url]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        m = re.search(r"chunks (\d+) failed (\d+)", proc.stderr)
        if m is None or int(m.group(1)) == 0:
            raise SystemExit(f"{name} in {tree}: no chunks counted\n{proc.stderr[-2000:]}")
        counts: dict[str, float] = {}
        for f in Path(out).glob("cg.out*"):
            lines = f.read_text().splitlines()
            names = next(line.split()[1:] for line in lines if line.startswith("events:"))
            totals = next(line.split()[1:] for line in lines if line.startswith("totals:"))
            for event, value in zip(names, totals):
                counts[event] = counts.get(event, 0) + int(value)
        return {event: value / int(m.group(1)) for event, value in counts.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--concurrency", default="32,128")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--tree", action="append", default=[], help="another tree to measure beside this one")
    p.add_argument("--sim", action="store_true", help="also instruction-cache misses and mispredicted indirect "
                   "branches a chunk (cache and branch simulation)")
    p.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        tree, name, c, seconds, url = args.child
        child(tree, name, int(c), float(seconds), url)
        return 0
    sys.path.insert(0, str(HERE))
    from client_overhead import start_server, stop
    proc, url = start_server("--mode", "burst", "--events", "128")
    try:
        sim = ("  raw I1 miss  lg I1 miss  raw ind.mispr  lg ind.mispr  (a chunk)" if args.sim else "")
        print(f"{'tree':<24} {'conc':>5} {'raw instr/chunk':>16} {'loadgen instr/chunk':>20} {'lg/raw':>7}{sim}")
        for tree in [str(HERE.parent), *args.tree]:
            for c in (int(x) for x in args.concurrency.split(",")):
                raw = measure(tree, "raw", c, args.seconds, url, args.sim)
                lg = measure(tree, "loadgen", c, args.seconds, url, args.sim)
                row = f"{Path(tree).name[:24]:<24} {c:>5} {raw['Ir']:>16,.0f} {lg['Ir']:>20,.0f} {lg['Ir'] / raw['Ir']:>6.3f}x"
                if args.sim:
                    row += (f"  {raw['I1mr']:>11.1f} {lg['I1mr']:>11.1f} {raw['Bim']:>14.1f} {lg['Bim']:>13.1f}")
                print(row, flush=True)
    finally:
        stop(proc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
