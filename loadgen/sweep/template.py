"""Argv templates with {placeholders}: rendered per configuration, never through a shell.

A placeholder is `{name}` (letters, digits, underscore); `{{` and `}}` are literal braces. A value must be
a TOML scalar whose text is made only of safe characters (letters, digits and `_ . , : + = @ /`, and `-`
anywhere but first unless the value is a number): the rendered argv is often handed to a remote shell by ssh,
so a value that could be read as shell syntax or as an option is refused before anything runs.

`{python}` is the interpreter that runs loadgen (`sys.executable`), unless the configuration sets `python`: a
reconfigure command that starts `{python} -m loadgen sim` works from any install (a venv that is not
activated included), where `python3` from PATH may not know loadgen.
"""

from __future__ import annotations

import difflib
import re
import sys

from loadgen.errors import UsageError

TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}|\{|\}")
SAFE_VALUE = re.compile(r"[A-Za-z0-9_.,:+=@/-]+")
NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?")
BUILTINS = {"python": sys.executable}  # placeholders with a value in every configuration


def value_text(key: str, value, where: str) -> str:
    """The text a placeholder value renders as; UsageError when it is not a safe scalar."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (int, float)):
        text = repr(value) if isinstance(value, float) else str(value)
    elif isinstance(value, str):
        text = value
    else:
        raise UsageError(f"{where}: {key} = {value!r} must be a string, number or boolean, not a "
                         f"{type(value).__name__}")
    if not SAFE_VALUE.fullmatch(text) or (text.startswith("-") and not NUMBER.fullmatch(text)):
        raise UsageError(f"{where}: {key} = {text!r} has characters a shell or a program could misread; "
                         "use only letters, digits and _ . , : + = @ / - (not a leading -)")
    return text


def render(template: str, values: dict[str, str], where: str) -> str:
    """`template` with each {name} replaced by values[name] (already checked by `value_text`)."""
    def sub(m: re.Match) -> str:
        tok = m.group(0)
        if tok == "{{":
            return "{"
        if tok == "}}":
            return "}"
        name = m.group(1)
        if name is None:
            raise UsageError(f"{where}: stray {tok!r} in {template!r}; write {{name}} for a placeholder "
                             "or double it ({{ or }}) for a literal brace")
        if name not in values and name in BUILTINS:
            return BUILTINS[name]
        if name not in values:
            close = difflib.get_close_matches(name, [*values, *BUILTINS], 1)
            fix = f"did you mean {{{close[0]}}}?" if close else f"add {name} = … to each configuration"
            raise UsageError(f"{where}: {{{name}}} has no value; {fix}")
        return values[name]

    return TOKEN.sub(sub, template)


def render_argv(argv: list[str], values: dict[str, str], where: str) -> list[str]:
    return [render(a, values, where) for a in argv]
