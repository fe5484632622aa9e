"""Logging to stderr (journald) or stdout (a container) as text or JSON, the same in the supervisor and its workers."""

from __future__ import annotations

import json
import logging
import sys
import time

from ffwatchd.store.names import shown


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data = {"ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
                "level": record.levelname.lower(), "logger": record.name, "process": record.processName,
                "msg": record.getMessage()}
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data)


class TextFormatter(logging.Formatter):
    """One line per record: control characters in the message (a newline or an escape sequence in
    a file name) are shown escaped, so no name forges a log line; tracebacks stay as they are."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = shown(record.message)
        return super().formatMessage(record)


def setup_logging(level: str = "info", fmt: str = "text", process: str = "main", stream: str = "stderr") -> None:
    handler = logging.StreamHandler(sys.stdout if stream == "stdout" else sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter(f"%(asctime)s %(levelname)s [{process}] %(name)s: %(message)s"))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level.upper())
