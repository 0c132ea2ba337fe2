"""Recognising llama.cpp's llama-server and reading its settings, without the server: the marks it leaves on
`/v1/models`, the server info assembled from the captured `/props`, `/slots` and `/v1/models` answers, the
launch flags parsed from a command line, and the local process found through /proc by the port it listens on.
The same code against a real llama-server is in test_llamacpp.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen.engines.llamacpp import context_per_slot, is_props, model_meta, recognised_by, server_info
from loadgen.target.discover import Target
from loadgen.target.engine_detect import engine_from_metrics
from loadgen.target.launch_args import (
    flag_values,
    llamacpp_settings,
    local_llamacpp_settings,
    loopback_port,
)

SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "samples"


def sample(name: str):
    path = SAMPLES / name
    if not path.exists():
        # CI checks ../shared out beside the clone: there a missing sample is a broken checkout, not a skip
        assert os.environ.get("CI", "").lower() != "true", f"CI=true but {path} is missing"
        pytest.skip(f"{path} not present (outside CI the shared samples are optional)")
    return json.loads(path.read_text())


@pytest.mark.unit
@pytest.mark.parametrize("models, header, marks", [
    ({"data": [{"id": "m", "owned_by": "llamacpp"}]}, "llama.cpp", ["Server header", "owned_by"]),
    ({"data": [{"id": "m", "owned_by": "llamacpp"}]}, None, ["owned_by"]),
    ({"data": [{"id": "m", "owned_by": "sglang"}]}, "llama.cpp", ["Server header"]),
    ({"data": [{"id": "m", "owned_by": "vllm"}]}, "uvicorn", []),
    (None, None, []),
    ({"data": "not a list"}, "Python/3.11 aiohttp/3.9", []),
])
def test_llamacpp_is_recognised_by_its_header_or_owner(models, header, marks):
    assert recognised_by(models, header) == marks


@pytest.mark.unit
def test_the_captured_answers_give_context_slots_and_speculation():
    models, props, slots = (sample(f"llamacpp-{n}.json") for n in ("v1_models", "props", "slots_busy"))
    assert recognised_by(models, None) == ["owned_by"]
    assert is_props(props) and not is_props({"build_info": "x"}) and not is_props([])
    meta = model_meta(models, "target.gguf")
    assert meta["n_ctx"] == 512 and model_meta(models, "other") == {}
    assert context_per_slot(meta, props) == 512
    assert context_per_slot({}, props) == 512  # /props alone gives it too
    assert context_per_slot({}, None) is None
    info = server_info(meta, props, slots, None, ["owned_by"])
    assert info["context_length"] == 512
    assert info["parallel_slots"] == 2
    assert info["speculative"] is True
    assert info["build_info"] == "b1-0c1e570" and info["model_path"] == "target.gguf"
    assert info["model_meta"]["n_vocab"] == 128256 and "n_ctx" not in info["model_meta"]
    assert info["settings_from"] == ["/v1/models", "/props", "/slots"]
    for volatile in ("media_marker", "is_sleeping", "is_processing", "id_task", "next_token", '"params"'):
        assert volatile not in json.dumps(info), volatile


@pytest.mark.unit
def test_one_configuration_keeps_its_fingerprint_and_a_draft_setting_changes_it():
    models, props, slots = (sample(f"llamacpp-{n}.json") for n in ("v1_models", "props", "slots_busy"))
    meta = model_meta(models, "target.gguf")
    launch = {"speculative_draft_model_path": "draft.gguf", "speculative_draft_n_max": 4}

    def fingerprint(props, slots, launch) -> str:
        return Target("u", "openai-chat", "m", "llamacpp", server_info(meta, props, slots, launch, [])).fingerprint()

    restarted = {**props, "media_marker": "<__media_other__>", "is_sleeping": True}
    idle = [{"id": s["id"], "n_ctx": s["n_ctx"], "speculative": True, "is_processing": False} for s in slots]
    assert fingerprint(props, slots, launch) == fingerprint(restarted, idle, launch)
    assert fingerprint(props, slots, launch) != fingerprint(props, slots, {**launch, "speculative_draft_n_max": 2})
    assert fingerprint(props, slots, launch) != fingerprint(props, slots, {**launch,
                                                                           "speculative_draft_model_path": "b.gguf"})
    via_proxy = Target("u", "openai-chat", "m", "llamacpp", server_info(meta, props, slots, launch, ["/props"]))
    assert via_proxy.fingerprint() == fingerprint(props, slots, launch)  # how it was recognised is not a setting
    no_spec = [{**s, "speculative": False} for s in idle]
    assert fingerprint(props, idle, None) != fingerprint(props, no_spec, None)


@pytest.mark.unit
@pytest.mark.parametrize("argv, env, want", [
    (["llama-server", "-m", "t.gguf", "-md", "d.gguf", "--spec-type", "draft-simple", "--spec-draft-n-max", "4",
      "--spec-draft-n-min", "0", "-np", "2", "-c", "1024", "--metrics", "--slots", "--port", "8080"], {},
     {"model_path": "t.gguf", "speculative_draft_model_path": "d.gguf", "speculative_type": "draft-simple",
      "speculative_draft_n_max": 4, "speculative_draft_n_min": 0, "parallel_slots": 2, "context_size_total": 1024}),
    # --flag=value, the long spellings, a p_min; the last of a repeated flag wins, as in llama.cpp
    (["llama-server", "--model-draft=d.gguf", "--spec-draft-p-min", "0.75", "--parallel", "1", "--parallel", "4"], {},
     {"speculative_draft_model_path": "d.gguf", "speculative_draft_p_min": 0.75, "parallel_slots": 4}),
    # llama.cpp reads LLAMA_ARG_* too; a flag wins over its variable
    (["llama-server", "--spec-draft-n-max", "8"], {"LLAMA_ARG_SPEC_DRAFT_N_MAX": "3", "LLAMA_ARG_SPEC_DRAFT_MODEL": "e.gguf"},
     {"speculative_draft_n_max": 8, "speculative_draft_model_path": "e.gguf"}),
    # nothing of the rest of the command line is kept (an --api-key on it never reaches the results)
    (["llama-server", "--api-key", "sk-secret", "--host", "127.0.0.1"], {"LLAMA_ARG_API_KEY": "sk-secret"}, {}),
])
def test_launch_flags_give_the_speculative_settings(argv, env, want):
    assert llamacpp_settings(argv, env) == want


@pytest.mark.unit
def test_flag_values_take_the_next_word_or_the_part_after_equals():
    assert flag_values(["x", "-a", "1", "--b=2", "--c"]) == {"-a": "1", "--b": "2"}


@pytest.mark.unit
@pytest.mark.parametrize("url, port", [
    ("http://127.0.0.1:8080", 8080), ("http://localhost:9000/v1", 9000), ("http://[::1]:81", 81),
    ("http://127.0.0.2", 80), ("https://localhost", 443), ("http://10.0.0.5:8080", None),
    ("http://example.org:8080", None),
])
def test_only_a_loopback_target_is_looked_up_locally(url, port):
    assert loopback_port(url) == port


LISTENER = r'''
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True)
sys.stdin.read()
'''


@pytest.mark.sim
@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc")
def test_the_process_listening_on_the_port_gives_its_launch_settings(tmp_path):
    script = tmp_path / "listener.py"
    script.write_text(LISTENER)
    argv = [sys.executable, str(script), "-md", "draft.gguf", "--spec-draft-n-max", "3", "-np", "2"]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "LLAMA_ARG_SPEC_DRAFT_N_MIN": "1", "SOME_TOKEN": "sk-x"})
    try:
        port = int(proc.stdout.readline())
        got = local_llamacpp_settings(f"http://127.0.0.1:{port}")
        assert got == ({"speculative_draft_model_path": "draft.gguf", "speculative_draft_n_max": 3,
                        "speculative_draft_n_min": 1, "parallel_slots": 2}, None)
    finally:
        proc.stdin.close()
        proc.wait(10)
    plain = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:  # a process that is not llama-server (a local proxy, say) has no settings to give
        plain_port = int(plain.stdout.readline())
        settings, why = local_llamacpp_settings(f"http://localhost:{plain_port}")
        assert settings is None and "is not llama-server (python" in why
    finally:
        plain.stdin.close()
        plain.wait(10)
    settings, why = local_llamacpp_settings(f"http://127.0.0.1:{port}")  # nobody listens there any more
    assert settings is None and f"port {port}" in why
    settings, why = local_llamacpp_settings("http://192.0.2.7:8080")  # never contacted: the host is not local
    assert settings is None and "loopback" in why


@pytest.mark.unit
def test_unknown_draft_settings_are_said_so_in_the_server_info():
    models, props, slots = (sample(f"llamacpp-{n}.json") for n in ("v1_models", "props", "slots_busy"))
    info = server_info(model_meta(models, "target.gguf"), props, slots, None, [], "not on this machine")
    assert info["draft_settings_unknown"] == "not on this machine"
    assert "process command line" not in info["settings_from"]
    assert "draft_settings_unknown" not in server_info({}, props, slots, {}, [], None)


@pytest.mark.unit
def test_llamacpp_metric_names_name_the_engine():
    assert engine_from_metrics("# HELP x\nllamacpp:prompt_tokens_total 5\n") == "llamacpp"
