"""Errors that end a run before any load is sent: one line, what was wrong and how to fix it, exit code 2."""


class UsageError(Exception):
    exit_code = 2
