"""A client that hangs up mid-stream is not an error of the simulator: aiohttp would log a traceback for each
such request ("Error handling request ... Cannot write to closing transport"), which after a cancelled run
(a second Ctrl-C) buries the console. The truth log still records each one as `client_disconnected`."""

from __future__ import annotations

import logging

SERVER_LOGGER = "aiohttp.server"


class HungUpFilter(logging.Filter):
    """Drops log records whose exception is a connection the client closed; keeps every other error."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, ConnectionResetError | BrokenPipeError)


def quiet_hang_ups() -> None:
    logger = logging.getLogger(SERVER_LOGGER)
    if not any(isinstance(f, HungUpFilter) for f in logger.filters):
        logger.addFilter(HungUpFilter())
