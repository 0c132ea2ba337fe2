"""`--ray`'s pure parts: the clock mapping of a part onto the driver's time base (tables of exchanges), the
placement plan from a cluster's nodes, and the flags' checks (exit 2 with one line)."""

from __future__ import annotations

import pytest

from loadgen.errors import UsageError
from loadgen.parallel.ray_clock import (
    MAX_UNCERTAINTY_NS,
    ClockMap,
    Exchange,
    clock_map,
    shift_record,
    too_uncertain,
)
from loadgen.parallel.ray_plan import Node, Placement, plan, ray_nodes
from loadgen.record import CellKey, Record

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("exchanges", "offset_ns", "uncertainty_ns"), [
    # the worker's clock 1 s behind, symmetric legs of 100 µs: exact
    ([Exchange(10_000_000_000, 9_000_100_000, 10_000_200_000)], 1_000_000_000, 100_000),
    # the shortest round trip wins, whatever the order; its half is the uncertainty
    ([Exchange(0, 5_000, 40_000), Exchange(100_000, 99_000 + 2_000, 104_000), Exchange(200_000, 0, 260_000)],
     100_000 + 2_000 - 101_000, 2_000),
    # the worker ahead of the driver: a negative offset
    ([Exchange(1_000, 501_000, 3_000)], -499_000, 1_000),
    # an odd round trip rounds the uncertainty up (never claims more certainty than measured)
    ([Exchange(0, 0, 3)], 1, 2),
])
def test_the_offset_is_the_midpoint_of_the_best_round_trip(exchanges, offset_ns, uncertainty_ns):
    m = clock_map(exchanges)
    assert (m.offset_ns, m.uncertainty_ns, m.exchanges) == (offset_ns, uncertainty_ns, len(exchanges))


def test_an_asymmetric_round_trip_errs_by_at_most_the_uncertainty():
    # true offset 7 ms; the way out takes 300 µs, the way back 50 µs: the estimate is off by 125 µs ≤ 175 µs
    true_offset, out_ns, back_ns = 7_000_000, 300_000, 50_000
    t0 = 1_000_000_000
    t_worker = t0 + out_ns - true_offset
    m = clock_map([Exchange(t0, t_worker, t0 + out_ns + back_ns)])
    assert abs(m.offset_ns - true_offset) == 125_000 <= m.uncertainty_ns == 175_000


def test_mapping_round_trips_and_refuses_nonsense():
    m = ClockMap(offset_ns=5_000, uncertainty_ns=10)
    assert m.to_worker(m.to_driver(123)) == 123 and m.to_driver(0) == 5_000
    with pytest.raises(ValueError):
        clock_map([])
    with pytest.raises(ValueError):
        clock_map([Exchange(10, 0, 5)])


def test_a_record_moves_onto_the_driver_clock_with_its_intervals_kept():
    rec = Record(run_id="r", cell=CellKey(60, 4), seq=3, t_intended_ns=100, t_sent_ns=110, t_first_byte_ns=150,
                 t_first_token_ns=160, t_last_token_ns=400, t_end_ns=410, chunk_gaps_ns=[30, 40])
    moved = shift_record(rec, 1_000)
    assert (moved.t_intended_ns, moved.t_sent_ns, moved.t_first_token_ns, moved.t_end_ns) == (1100, 1110, 1160, 1410)
    assert moved.t_first_reasoning_ns is None and moved.chunk_gaps_ns == [30, 40]
    assert moved.t_first_token_ns - moved.t_sent_ns == rec.t_first_token_ns - rec.t_sent_ns
    assert shift_record(rec, 0) is rec


def test_nodes_mapped_worse_than_the_bound_are_named():
    maps = {"a": ClockMap(0, MAX_UNCERTAINTY_NS), "b": ClockMap(0, MAX_UNCERTAINTY_NS + 1), "c": ClockMap(0, 9)}
    assert too_uncertain(maps) == ["b (± 5.0 ms)"]


def nodes(n: int, *extra: Node) -> list[Node]:
    return [Node(f"id{i}", f"10.0.0.{i}", f"host{i}", 4.0) for i in range(n)] + list(extra)


def test_workers_n_go_one_per_node_in_a_strict_spread_group():
    p = plan(nodes(3), workers=3, per_node=None)
    assert (p.parts, p.placement, p.pinned) == (3, Placement.STRICT_SPREAD, ())
    assert plan(nodes(3), workers=2, per_node=None).parts == 2


def test_more_parts_than_nodes_is_refused_naming_the_count():
    dead, headless = Node("idx", "10.0.0.9", "gone", 4.0, alive=False), Node("idh", "10.0.0.8", "head", 0.0)
    with pytest.raises(UsageError, match=r"--workers 3 needs 3 nodes, the cluster has 2 .*--workers-per-node"):
        plan(nodes(2, dead, headless), workers=3, per_node=None)
    with pytest.raises(UsageError, match="no node of the cluster can hold a part"):
        plan([dead, headless], workers=1, per_node=None)


def test_per_node_pins_parts_round_robin_over_the_usable_nodes():
    p = plan(nodes(2, Node("idh", "10.0.0.8", "head", 0.0)), workers=1, per_node=3)
    assert p.placement is Placement.PER_NODE and p.parts == 6
    assert p.pinned == ("id0", "id1", "id0", "id1", "id0", "id1")  # slot s → part s mod 6 → node (s mod 6) mod 2


def test_ray_nodes_reads_the_listing():
    listing = [{"NodeID": "abc", "NodeManagerAddress": "10.1.1.1", "NodeManagerHostname": "gpu-1", "Alive": True,
                "Resources": {"CPU": 8.0, "GPU": 1.0}}, {"NodeID": "def", "Alive": False, "Resources": {}}]
    assert ray_nodes(listing) == [Node("abc", "10.1.1.1", "gpu-1", 8.0, True), Node("def", "?", "?", 0.0, False)]


@pytest.mark.parametrize(("argv", "message"), [
    (("--workers-per-node", "2"), "--workers-per-node needs --ray ADDRESS"),
    (("--ray", "head"), "--ray 'head': give auto, host:port or ray://host:port"),
    (("--ray", "auto", "--workers", "2", "--workers-per-node", "2"), "--workers 2 and --workers-per-node 2: give one"),
    (("--ray", "auto", "--workers-per-node", "0"), "--workers-per-node 0: must be ≥ 1"),
    (("--ray", "auto", "--shard", "0/2", "--start-at", "+5", "--contexts", "60"), "--ray and --shard are two ways"),
])
def test_bad_ray_flags_exit_2_with_one_line(cli, argv, message):
    rc, _, err = cli(*argv, "--concurrency", "2")
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(("workers", "parts", "per_node"), [(None, 1, 1), ("1", 1, None), ("3", 3, None),
                                                            ("auto", 1, 1)])
def test_workers_given_are_the_parts_and_none_given_is_one_per_node(workers, parts, per_node):
    """`--ray` alone (or --workers auto) puts one part on every node; `--workers 1` given is one part."""
    import argparse

    from loadgen.cli.ray_options import ray_config
    from loadgen.config import ParallelConfig
    a = argparse.Namespace(ray="auto", workers_per_node=None, workers=workers, verify=None)
    par = ray_config(a, ParallelConfig(workers=int(workers) if workers not in (None, "auto") else 1))
    assert (par.workers, par.workers_per_node) == (parts, per_node)
