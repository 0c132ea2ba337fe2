"""Where the parts of a `--ray` run go: a pure plan from the cluster's nodes and the flags.

- `--workers N`: N parts, one per node, in a placement group of N one-CPU bundles with strategy STRICT_SPREAD
  (no two on one node). A cluster with fewer than N nodes that can hold a part is refused (exit 2, naming the
  count): N parts on fewer hosts is not what was asked for, and `--workers-per-node K` says it when meant.
- `--workers-per-node K` (and `--ray` alone: K = 1): K parts on every node that can hold one, each pinned to its
  node (node affinity, not soft). Part i goes to node i mod M (M nodes), so the split of a cell's slots
  (slot s → part s mod N) spreads them over the nodes first.

A node can hold a part when it is alive and offers at least one CPU (a KubeRay head started with
`num-cpus: 0` takes none).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from loadgen.errors import UsageError


class Placement(StrEnum):
    STRICT_SPREAD = "STRICT_SPREAD"  # a placement group: one bundle per node, N ≤ nodes
    PER_NODE = "PER_NODE"  # each part pinned to its node (node affinity)


@dataclass(frozen=True, slots=True)
class Node:
    """A node of the cluster as Ray lists it (`ray.nodes()`)."""

    node_id: str
    ip: str
    host: str
    cpus: float
    alive: bool = True

    def label(self) -> str:
        return f"{self.host} ({self.ip}, Ray node {self.node_id[:12]})"


@dataclass(frozen=True, slots=True)
class Plan:
    """`parts` parts placed by `placement`; `pinned[i]` is part i's node (PER_NODE only)."""

    parts: int
    placement: Placement
    pinned: tuple[str, ...] = ()


def usable(nodes: list[Node]) -> list[Node]:
    return sorted((n for n in nodes if n.alive and n.cpus >= 1), key=lambda n: (n.ip, n.node_id))


def ray_nodes(listing: list[dict]) -> list[Node]:
    """`ray.nodes()` as `Node`s."""
    return [Node(node_id=d["NodeID"], ip=d.get("NodeManagerAddress", "?"), host=d.get("NodeManagerHostname", "?"),
                 cpus=float((d.get("Resources") or {}).get("CPU", 0)), alive=bool(d.get("Alive")))
            for d in listing]


def plan(nodes: list[Node], workers: int, per_node: int | None) -> Plan:
    """The plan of the module docstring, or UsageError when the cluster cannot hold it."""
    ready = usable(nodes)
    if not ready:
        raise UsageError(f"--ray: no node of the cluster can hold a part ({len(nodes)} nodes, none alive with a "
                         "CPU); start Ray on the client hosts (ray start --address=HEAD:6379)")
    if per_node is not None:
        pinned = tuple(ready[i % len(ready)].node_id for i in range(per_node * len(ready)))
        return Plan(len(pinned), Placement.PER_NODE, pinned)
    if workers > len(ready):
        raise UsageError(f"--ray: --workers {workers} needs {workers} nodes, the cluster has {len(ready)} that can "
                         f"hold a part; give --workers ≤ {len(ready)}, or --workers-per-node K for K on each node")
    return Plan(workers, Placement.STRICT_SPREAD)
