"""The default --wait-ready tells a port that never answered from a server that was up or is loading (pure)."""

from __future__ import annotations

import pytest

from loadgen.run.ready_wait import NeverAnswered

pytestmark = pytest.mark.unit

REFUSED = "connection refused: nothing listens on 127.0.0.1:9"


@pytest.mark.parametrize("states, limit_s, gives_up", [
    ([(0, REFUSED), (29, REFUSED)], 30, False),  # not yet
    ([(0, REFUSED), (30, REFUSED)], 30, True),  # refused since the first try, for the limit
    ([(0, "/health_generate answered 503"), (31, REFUSED)], 30, False),  # was up: waits the full time
    ([(0, REFUSED), (5, "/v1/models answered 503"), (40, REFUSED)], 30, False),  # came up once: loading
    ([(0, REFUSED), (500, REFUSED)], None, False),  # --wait-ready given: no limit
])
def test_never_answered_gives_up_only_on_refusals_since_the_first_try(states, limit_s, gives_up):
    never = NeverAnswered(limit_s)
    assert [never.give_up(t, s) for t, s in states][-1] is gives_up


def test_the_limit_holds_only_for_the_default_wait_ready(tmp_path):
    from loadgen.cli.run_config import config_from_args
    from loadgen.cli.run_options import run_parser

    out = str(tmp_path / "x.json")
    default = config_from_args(run_parser().parse_args(["--url", "http://127.0.0.1:9", "--out", out]))
    assert (default.wait_ready_s, default.wait_refused_s) == (600, 30)
    told = config_from_args(run_parser().parse_args(["--url", "http://127.0.0.1:9", "--wait-ready", "600",
                                                     "--out", out]))
    assert (told.wait_ready_s, told.wait_refused_s) == (600, None)
