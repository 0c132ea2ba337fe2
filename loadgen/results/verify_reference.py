"""A verification reference on disk (`--verify-save-reference FILE`, read by `--verify-reference FILE`): the
prompts, the settings they were answered with and each prompt's output.

A reference is used only for what it answers: the same prompts in the same order (their digest) and the same
max tokens; anything else is refused before any load (exit 2), with what differs.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadgen.client.verify_request import VerifyOutput
from loadgen.errors import UsageError
from loadgen.files import read_json, write_json_atomic

REFERENCE_SCHEMA = "loadgen.verify-reference/v1"


@dataclass
class Reference:
    """The outputs the cells' outputs are compared with; `source` names where they came from."""

    source: str
    prompts: list[str]
    max_tokens: int
    outputs: list[VerifyOutput]
    digest: str
    model: str | None = None
    api: str | None = None

    def to_json(self) -> dict:
        return {"schema": REFERENCE_SCHEMA, "source": self.source, "model": self.model, "api": self.api,
                "max_tokens": self.max_tokens, "prompts_digest": self.digest, "prompts": self.prompts,
                "outputs": [o.to_json() for o in self.outputs]}

    def save(self, path: str) -> None:
        write_json_atomic(path, self.to_json())


def load_reference(path: str, flag: str = "--verify-reference") -> Reference:
    """The reference saved at `path`; an unreadable file or one that is not a reference is a UsageError."""
    try:
        doc = read_json(path)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{flag} {path}: cannot be read ({exc}); give a file written by "
                         "--verify-save-reference") from None
    if not isinstance(doc, dict) or doc.get("schema") != REFERENCE_SCHEMA or not doc.get("outputs"):
        raise UsageError(f"{flag} {path}: not a verification reference ({REFERENCE_SCHEMA}); give a file "
                         "written by --verify-save-reference")
    try:
        outputs = [VerifyOutput.from_json(o) for o in doc["outputs"]]
        return Reference(f"file:{path}", list(doc["prompts"]), int(doc["max_tokens"]), outputs,
                         str(doc["prompts_digest"]), doc.get("model"), doc.get("api"))
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{flag} {path}: a field is missing or wrong ({exc}); write it again with "
                         "--verify-save-reference") from None


def check_matches(ref: Reference, digest: str, max_tokens: int, flag: str = "--verify-reference") -> None:
    """The reference answers these prompts with these max tokens, else a UsageError naming the difference."""
    if ref.digest != digest:
        raise UsageError(f"{flag}: the reference answers other prompts ({len(ref.prompts)} prompts, digest "
                         f"{ref.digest} ≠ {digest}); give the same --verify-prompts it was saved with")
    if ref.max_tokens != max_tokens:
        raise UsageError(f"{flag}: the reference was answered with --verify-max-tokens {ref.max_tokens}, this "
                         f"run asks {max_tokens}; give --verify-max-tokens {ref.max_tokens}")
