"""A free TCP port on 127.0.0.1, asked of the kernel (port 0), for every server a test starts:
no test listens on a fixed port another program on the machine may hold."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
