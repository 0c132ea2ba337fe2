"""Errors that end a run before any load is sent: one line, what was wrong and how to fix it, exit code 2."""


ERROR_ROOM = 104  # an error's text within 120 columns once the CLI prefixes 'loadgen: error: '


class UsageError(Exception):
    exit_code = 2


class ServerError(Exception):
    """The server failed a helper request (tokenize, probe) after the run started: the cell fails, the run
    goes on, and what was measured is kept."""
