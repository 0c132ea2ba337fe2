"""docs/engines.md's facts are generated from the adapters and up to date, and the response fields the adapters
name are the fields the client reads."""

from __future__ import annotations

import pytest

from loadgen.engines import doc, registry
from tests.conftest import ROOT

pytestmark = pytest.mark.unit

PAGE = ROOT / "docs" / "engines.md"


def test_docs_engines_md_carries_the_adapters_facts():
    text = PAGE.read_text()
    assert doc.render() in text, "docs/engines.md is stale: python3 -m loadgen.engines.doc docs/engines.md"
    assert doc.splice(text) == text


def test_the_check_catches_a_fact_the_doc_does_not_say(monkeypatch):
    vllm = registry.adapter("vllm")
    monkeypatch.setattr(type(vllm), "spec_keys", ("speculative_config",))
    assert doc.render() not in PAGE.read_text()


def test_splice_replaces_only_the_generated_part():
    page = f"# Title\nprose\n\n{doc.BEGIN}\nold facts\n{doc.END}\nafter\n"
    assert doc.splice(page) == f"# Title\nprose\n\n{doc.render()}after\n"
    assert doc.splice("# Title\n") == f"# Title\n\n{doc.render()}"


def test_every_response_field_an_adapter_names_is_read_by_the_client():
    """A field's last key appears as a string in the client's stream parser (loadgen/client/stream.py), so a
    renamed field on either side fails here."""
    source = (ROOT / "loadgen" / "client" / "stream.py").read_text()
    fields = [f.path for a in registry.ADAPTERS for f in a.response_fields]
    missing = [p for p in fields if f'"{p.rsplit(".", 1)[-1]}"' not in source]
    assert fields and missing == []
