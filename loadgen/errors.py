"""Errors that end a run before any load is sent: one line, what was wrong and how to fix it, exit code 2."""


class UsageError(Exception):
    exit_code = 2


class ServerError(Exception):
    """The server failed a helper request (tokenize, probe) after the run started: the cell fails, the run
    goes on, and what was measured is kept."""
