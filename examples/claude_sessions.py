"""Claude Agent SDK sessions on redistate: one process mirrors a conversation's
transcript into the store, another lists, reads, renames and forks it with the SDK's
own store functions.

The first process appends the transcript as the SDK's transcript mirror does, in
batches, and sends one batch twice (the SDK retries a batch that failed; here its
entries' uuids say they are stored already). No model runs, so no network and no API
key: the entries are what the Claude Code CLI writes for a turn.

python examples/claude_sessions.py    # a local server is started (redistate[embedded])
REDISTATE_URL=redis://localhost:6379/0 python examples/claude_sessions.py
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

from claude_agent_sdk import (
    fork_session_via_store,
    get_session_messages_from_store,
    list_sessions_from_store,
    project_key_for_directory,
    rename_session_via_store,
)

from redistate import AsyncStore
from redistate.claude import RedistateSessionStore

DIRECTORY = "/srv/launch-planner"  # the agent's working directory: the project
SESSION = "6f1c2a9e-0b4d-4e7a-9d35-2c8f1e0a7b61"


def line(n: int, kind: str, content: Any, parent: str | None) -> dict[str, Any]:
    """A transcript line as the CLI writes it."""
    return {
        "type": kind,
        "uuid": f"00000000-0000-4000-8000-{n:012d}",
        "parentUuid": parent,
        "sessionId": SESSION,
        "timestamp": f"2026-12-04T10:00:0{n}.000Z",
        "cwd": DIRECTORY,
        "message": {"role": kind, "content": content},
    }


TURN_1: list[Any] = [
    line(1, "user", "Plan the launch of the beta.", None),
    line(2, "assistant", [{"type": "text", "text": "1. Freeze features. 2. Invite 50 users."}],
         "00000000-0000-4000-8000-000000000001"),
]  # fmt: skip
TURN_2: list[Any] = [
    line(3, "user", "Add a rollback step.", "00000000-0000-4000-8000-000000000002"),
    line(4, "assistant", [{"type": "text", "text": "3. Keep the old build one click away."}],
         "00000000-0000-4000-8000-000000000003"),
]  # fmt: skip


async def mirror(url: str) -> None:
    """The first process: the transcript as the SDK's mirror sends it."""
    async with AsyncStore.from_url(url, namespace="claude-example") as store:
        sessions = RedistateSessionStore(store, ttl=7 * 24 * 3600)
        key: Any = {"project_key": project_key_for_directory(DIRECTORY), "session_id": SESSION}
        await sessions.append(key, TURN_1)
        await sessions.append(key, TURN_1)  # the same batch again: stored once
        await sessions.append(key, TURN_2)
        print(f"pid {os.getpid()}: mirrored {len(TURN_1) * 2 + len(TURN_2)} lines")


async def browse(url: str) -> None:
    """The second process: the SDK's own functions, over the same store."""
    async with AsyncStore.from_url(url, namespace="claude-example") as store:
        sessions = RedistateSessionStore(store, ttl=7 * 24 * 3600)
        (info,) = await list_sessions_from_store(sessions, directory=DIRECTORY)
        print(f"pid {os.getpid()}: found session {info.session_id[:8]}: {info.summary!r}")
        messages = await get_session_messages_from_store(sessions, SESSION, directory=DIRECTORY)
        print(f"pid {os.getpid()}: {len(messages)} messages, the last by {messages[-1].type}")
        await rename_session_via_store(sessions, SESSION, "Beta launch", directory=DIRECTORY)
        await fork_session_via_store(
            sessions, SESSION, directory=DIRECTORY, title="Beta, no rollback"
        )


async def report(url: str) -> None:
    async with AsyncStore.from_url(url, namespace="claude-example") as store:
        sessions = RedistateSessionStore(store)
        for info in await list_sessions_from_store(sessions, directory=DIRECTORY):
            print(f"session: {info.summary!r}, first prompt {info.first_prompt!r}")


async def reset(url: str) -> None:
    async with AsyncStore.from_url(url, namespace="claude-example") as store:
        sessions = RedistateSessionStore(store)
        project = project_key_for_directory(DIRECTORY)
        for found in await sessions.list_sessions(project):
            await sessions.delete({"project_key": project, "session_id": found["session_id"]})


@contextlib.contextmanager
def server() -> Iterator[str]:
    url = os.environ.get("REDISTATE_URL")
    if url:
        yield url
        return
    from redistate.cli._embedded import embedded_url

    with embedded_url() as found:
        yield found


def main() -> None:
    with server() as url:
        asyncio.run(reset(url))  # a fresh project each time
        for step in ("--mirror", "--browse"):
            done = subprocess.run([sys.executable, __file__, step, url], check=False)
            print(f"{step[2:]} process exit code: {done.returncode}")
        asyncio.run(report(url))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--mirror"]:
        asyncio.run(mirror(sys.argv[2]))
    elif sys.argv[1:2] == ["--browse"]:
        asyncio.run(browse(sys.argv[2]))
    else:
        main()
