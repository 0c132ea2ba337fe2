"""Enumerated values as `loadgen.names` members: the flags give members, the files and messages still show
the plain strings, and each API's stream state is its own class, chosen once."""

from __future__ import annotations

import orjson
import pytest

from loadgen.cli.run_config import config_from_args
from loadgen.cli.run_options import run_parser
from loadgen.cli.sim_options import sim_parser
from loadgen.client.stream import STATES, ChatState, CompletionsState, GenerateState, StreamState
from loadgen.names import Api, ArrivalLaw, Engine, HttpClient, Outcome, Phase, PrefixCache, ServerDownPolicy
from loadgen.record import OUTCOMES, CellKey, Record
from loadgen.sim.main import _sim_config

pytestmark = pytest.mark.unit


def _config(tmp_path, *argv: str):
    return config_from_args(run_parser().parse_args([*argv, "--out", str(tmp_path / "r.json")]))


def test_flags_give_members(tmp_path):
    cfg = _config(tmp_path, "--api", "sglang-generate", "--request-rate", "2", "--arrival", "gamma",
                  "--burstiness", "0.5", "--on-server-down", "skip", "--http-client", "aiohttp")
    assert cfg.api is Api.SGLANG_GENERATE
    assert cfg.open_loop.arrival is ArrivalLaw.GAMMA
    assert cfg.faults.on_server_down is ServerDownPolicy.SKIP
    assert cfg.parallel.http_client is HttpClient.AIOHTTP
    assert cfg.workload.prefix_cache is PrefixCache.UNIQUE


def test_defaults_are_members(tmp_path):
    cfg = _config(tmp_path, "--request-rate", "2")
    assert cfg.api is Api.OPENAI_CHAT
    assert cfg.open_loop.arrival is ArrivalLaw.POISSON
    assert cfg.faults.on_server_down is ServerDownPolicy.STOP
    assert cfg.parallel.http_client is HttpClient.H1


def test_the_results_args_hold_plain_strings(tmp_path):
    cfg = _config(tmp_path, "--api", "openai-completions", "--request-rate", "2", "--arrival", "constant")
    args = orjson.loads(orjson.dumps(cfg.public_args()))
    assert (args["api"], args["arrival"], args["on_server_down"], args["http_client"], args["prefix_cache"]) == (
        "openai-completions", "constant", "stop", "h1", "unique")


def test_a_record_is_written_with_plain_strings():
    rec = Record(run_id="r", cell=CellKey(60, 1), seq=0)
    assert (rec.outcome, rec.phase) == (Outcome.OK, Phase.MEASURE) and rec.ok
    assert orjson.loads(orjson.dumps(rec.to_dict()))["outcome"] == "ok"
    assert OUTCOMES == ("ok", "http_error", "timeout", "connection_error", "protocol_error", "cancelled", "abandoned")
    assert all(type(o) is str for o in OUTCOMES)  # they key by_outcome, and orjson takes no member as a key


@pytest.mark.parametrize("argv,message", [
    (["--http-client", "h2"], "argument --http-client: invalid choice: 'h2' (choose from 'h1', 'aiohttp')"),
    (["--arrival", "burst"], "argument --arrival: invalid choice: 'burst' (choose from 'constant', 'poisson', "
                             "'gamma')"),
    (["--prefix-cache", "off"], "argument --prefix-cache: invalid choice: 'off' (choose from 'unique', 'allow')"),
])
def test_an_invalid_choice_is_named_as_before(capsys, argv, message):
    with pytest.raises(SystemExit):
        run_parser().parse_args(argv)
    assert message in capsys.readouterr().err


def test_the_simulator_engine_is_a_member(capsys):
    assert _sim_config(sim_parser().parse_args(["--engine", "vllm"])).engine_name is Engine.VLLM
    assert _sim_config(sim_parser().parse_args([])).engine_name is Engine.SGLANG
    with pytest.raises(SystemExit):
        sim_parser().parse_args(["--engine", "tgi"])
    assert "invalid choice: 'tgi' (choose from 'sglang', 'vllm', 'llamacpp')" in capsys.readouterr().err


@pytest.mark.parametrize("api,cls", [("openai-chat", ChatState), ("openai-completions", CompletionsState),
                                     ("sglang-generate", GenerateState)])
def test_each_api_reads_its_events_with_its_own_class(api, cls):
    assert type(StreamState(api=api)) is cls and type(StreamState(api=Api(api))) is cls
    assert set(STATES) == set(Api)
