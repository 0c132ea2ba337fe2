"""How the command line talks back: help text that shows every default, and errors in at most three lines.

`DefaultsShown` is argparse's ArgumentDefaultsHelpFormatter, except where the help already says its default
(no "(default 8) (default: 8)"). `Parser` answers a bad command line with its one error line, a "did you
mean --concurrency?" for a mistyped option (difflib over the parser's own options) and where the help is,
instead of argparse's whole usage block (27 lines for `loadgen`, which hid the one line that mattered).
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from typing import NoReturn

UNRECOGNIZED = re.compile(r"^unrecognized arguments: (.*)$")
CLOSE_ENOUGH = 0.6  # difflib's ratio; --concurent → --concurrency is 0.92, --conc → --concurrency 0.63


class DefaultsShown(argparse.HelpFormatter):
    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        d = action.default
        if "default" in text or not action.option_strings or d is None or d is False or d == argparse.SUPPRESS:
            return text
        return text + " (default %(default)s)"


def closest_option(word: str, options: list[str]) -> str | None:
    """The option `word` was probably meant to be ('--concurent=4' → '--concurrency'), or None when none is
    close (difflib ratio ≥ CLOSE_ENOUGH) or `word` is no option at all."""
    if not word.startswith("-"):
        return None
    flag = word.split("=", 1)[0]
    found = difflib.get_close_matches(flag, [o for o in options if o.startswith("--")], n=1, cutoff=CLOSE_ENOUGH)
    return found[0] if found and found[0] != flag else None


def suggestion(message: str, options: list[str]) -> str:
    """'; did you mean --concurrency?' for each unrecognized option of argparse's `message` that is close to
    one of `options`; '' when none is."""
    m = UNRECOGNIZED.match(message)
    if not m:
        return ""
    meant = [(w, c) for w in m.group(1).split() if (c := closest_option(w, options))]
    return "".join(f"; did you mean {c}{' (for ' + w + ')' if len(meant) > 1 else ''}?" for w, c in meant)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (plus where the help is), exit 2."""

    def error(self, message: str) -> NoReturn:
        hint = suggestion(message, list(self._option_string_actions))
        sys.stderr.write(f"{self.prog}: error: {message}{hint}\n{self.prog} --help lists every option\n")
        sys.exit(2)
