"""The report of a tune's folder opens with tune.json's answer: per load the winner and margin or the tied set and
its state, the rest by the leader's margin, the why; then the infeasible configurations and the cost."""

from __future__ import annotations

import html as html_lib
import json
import re

import pytest

from loadgen.report.html_tune import tune_documents, tune_section

pytestmark = pytest.mark.unit


def tune_doc() -> dict:
    def answer(conc, decision, **kw):
        return {"context": 60, "concurrency": conc, "rate": None, "decision": decision, "winner": None, "tied": [],
                "runner_up": None, "margin": None, "margin_interval": None, "ranking": [], "contenders": [],
                "beyond_reach": [], "why": {"text": f"why at c={conc}"}} | kw
    return {"schema": "loadgen.tune/v1", "name": "sim", "objective": "output_tok_s", "resolution": 0.02,
            "complete": True, "stopped": None,
            "answers": [answer(1, "wins", winner="b64", runner_up="b32", margin=0.159, margin_interval=[0.015, 0.325],
                               ranking=[{"config": "b32", "loss": 0.159, "beaten": True},
                                        {"config": "b8", "loss": 1.177, "beaten": True}]),
                        answer(4, "tied", tied=["b32", "b32x"], margin=0.01, margin_interval=[-0.03, 0.05],
                               beyond_reach=["b32", "b32x"],
                               ranking=[{"config": "b32x", "loss": 0.01, "beaten": False}])],
            "infeasible": [{"name": "b64g", "sentence": "b64g: the server died under load at c=4",
                            "diagnostics_tail": "ready\nfault: crashing"}],
            "cells_measured": 9, "requests_measured": 144, "restarts": 5, "gpu_minutes": 0.4,
            "grid": {"restarts": 4, "cells": 8, "requests": 512, "gpu_minutes_estimate": 0.9}}


def plain(html: str) -> str:
    return html_lib.unescape(" ".join(re.sub(r"<[^>]+>", " ", html).split()))


def test_the_tune_section_says_the_answer_per_load_the_infeasible_and_the_cost(tmp_path):
    (tmp_path / "tune.json").write_text(json.dumps(tune_doc()))
    (tune,) = tune_documents([str(tmp_path), str(tmp_path / "missing")])
    html = tune_section(tune, {})
    assert 'data-decision="wins" data-winner="b64"' in html and 'data-tied="b32 b32x"' in html
    words = plain(html)
    assert "b64 wins by +15.9% [+1.5%, +32.5%] over b32" in words
    assert "tied: b32 , b32x (+1.0% [-3.0%, +5.0%], beyond one more round's reach)" in words
    assert "b32 +15.9% (beaten); b8 +117.7% (beaten)" in words and "b32x +1.0% (within noise)" in words
    assert "why at c=1" in words
    assert "b64g: the server died under load at c=4" in words and "| fault: crashing" in words
    assert "cost: 5 restarts, 9 cells, 144 measured requests" in words and "measured 28% of its requests" in words
