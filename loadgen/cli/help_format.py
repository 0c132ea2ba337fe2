"""Help text that shows every default: argparse's ArgumentDefaultsHelpFormatter, except where the help
already says its default (no "(default 8) (default: 8)")."""

from __future__ import annotations

import argparse


class DefaultsShown(argparse.HelpFormatter):
    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        d = action.default
        if "default" in text or not action.option_strings or d is None or d is False or d == argparse.SUPPRESS:
            return text
        return text + " (default %(default)s)"
