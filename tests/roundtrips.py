"""Count round trips as the server sees them: top-level commands from MONITOR.

INFO commandstats also counts the commands a script runs inside the server, so it
cannot tell one EVALSHA from four GETs; MONITOR marks script-inner commands with
``lua`` as their source, which lets us count only what clients sent.
"""

from __future__ import annotations

import uuid
from typing import Any

__all__ = ["RoundTrips", "server_reads"]


class RoundTrips:
    def __init__(self, client: Any) -> None:
        self._client = client
        self._monitor: Any = None

    def start(self) -> None:
        if self._monitor is None:
            self._monitor = self._client.monitor()
            self._monitor.__enter__()
            self.stop()  # the marker connection's own handshake is not counted

    def stop(self) -> list[list[str]]:
        """Commands sent since :meth:`start` (script-inner ones excluded)."""
        marker = f"redistate-marker-{uuid.uuid4().hex}"
        self._client.echo(marker)
        commands: list[list[str]] = []
        while True:
            entry = self._monitor.next_command()
            words = entry["command"].split(" ")
            if marker in entry["command"]:
                break
            if entry.get("client_type") == "lua":
                continue
            commands.append(words)
        return commands

    def count(self, fn: Any, *args: Any, **kwargs: Any) -> tuple[int, Any]:
        """Run ``fn`` and return (commands it sent, its result)."""
        self.start()
        result = fn(*args, **kwargs)
        return len(self.stop()), result

    def close(self) -> None:
        if self._monitor is not None:
            self._monitor.__exit__(None, None, None)
        self._client.close()


def server_reads(client: Any) -> int:
    """The server's count of requests read so far (``INFO stats total_reads_processed``):
    around a call, the difference minus 1 (the second INFO) is the call's round trips."""
    return int(client.info("stats")["total_reads_processed"])
