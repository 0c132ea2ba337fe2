"""docs/engines.md's facts are generated from the adapters and up to date, and the response fields the adapters
name are the fields the client reads."""

from __future__ import annotations

import pathlib
import sys

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


def test_every_response_field_an_adapter_names_is_read():
    """A field's last key appears as a string in its reader: the adapter's module (loadgen/engines/<engine>.py,
    its `field_readers` and `/generate`'s meta reader) or, for OpenAI's `usage` and the running counts, the
    client's stream parser (loadgen/client/stream.py), so a renamed field on either side fails here."""
    client = (ROOT / "loadgen" / "client" / "stream.py").read_text()
    missing = []
    for a in registry.ADAPTERS:
        own = pathlib.Path(sys.modules[type(a).__module__].__file__ or "").read_text()
        missing += [f.path for f in a.response_fields
                    if not any(f'"{f.path.rsplit(".", 1)[-1]}"' in source for source in (own, client))]
    fields = [f.path for a in registry.ADAPTERS for f in a.response_fields]
    assert fields and missing == []


def test_every_field_reader_reads_a_field_its_adapter_names():
    """An adapter's `field_readers` read fields it documents in `response_fields` (their first key)."""
    keys = [(a.name, r.key) for a in registry.ADAPTERS for r in a.field_readers]
    named = {(a.name, f.path.split(".", 1)[0]) for a in registry.ADAPTERS for f in a.response_fields}
    assert keys and [k for k in keys if k not in named] == []
