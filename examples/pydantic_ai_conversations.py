"""Pydantic AI conversations on redistate: two processes take turns in one
conversation, each loading what the other saved; a save from a stale copy is refused
(nothing written), and a fork explores another answer while the conversation goes on.

The agent runs pydantic-ai's TestModel (it calls each tool once, then answers), so no
network and no API key are needed.

python examples/pydantic_ai_conversations.py    # a local server is started (redistate[embedded])
REDISTATE_URL=redis://localhost:6379/0 python examples/pydantic_ai_conversations.py
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict
from pydantic_ai.models.test import TestModel

from redistate import AsyncStore
from redistate.pydantic_ai import RedistateConversationStore

CONVERSATION = "trip-planning"
agent = Agent(TestModel(custom_output_text="Noted."))


@agent.tool_plain
def forecast(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


async def turn(url: str, prompt: str) -> None:
    """One process's turn: load the conversation (or start it), run, save."""
    async with AsyncStore.from_url(url, namespace="pydantic-ai-example") as store:
        conversations = RedistateConversationStore(store, ttl=7 * 24 * 3600)
        conversation = await conversations.load(CONVERSATION, scope="ada")
        before = 0 if conversation is None else len(conversation.messages)
        conversation = conversation or Conversation(conversation_id=CONVERSATION)
        result = await agent.run(prompt, conversation=conversation)
        saved = await conversations.save(result, scope="ada")
        print(f"pid {os.getpid()}: loaded {before} messages, saved {len(saved)} new")


async def afterwards(url: str) -> None:
    async with AsyncStore.from_url(url, namespace="pydantic-ai-example") as store:
        conversations = RedistateConversationStore(store)
        stale = await conversations.load(CONVERSATION)
        fresh = await conversations.load(CONVERSATION)
        assert stale is not None and fresh is not None
        await conversations.save(await agent.run("And Lisbon?", conversation=fresh))
        try:
            await conversations.save(await agent.run("And Rome?", conversation=stale))
        except ConversationConflict:
            print("stale save refused: conflict")
        fork = await conversations.fork(CONVERSATION, at=4, new_conversation_id="trip-b")
        await conversations.save(await agent.run("What about trains?", conversation=fork))
        await conversations.update(CONVERSATION, title="Trip", expected_title=None)
        for record in await conversations.list_conversations(scope="ada"):
            loaded = await conversations.load(record.conversation_id)
            assert loaded is not None
            print(f"{record.conversation_id}: {len(loaded.messages)} messages, "
                  f"title {record.title!r}, forked from {record.forked_from!r}")  # fmt: skip


async def reset(url: str) -> None:
    async with AsyncStore.from_url(url, namespace="pydantic-ai-example") as store:
        conversations = RedistateConversationStore(store)
        for record in await conversations.list_conversations():
            await conversations.delete(record.conversation_id)


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
        asyncio.run(reset(url))  # a fresh conversation each time
        for prompt in ("Plan a trip to Porto.", "Pack for the weather."):
            done = subprocess.run([sys.executable, __file__, "--turn", url, prompt], check=False)
            print(f"turn process exit code: {done.returncode}")
        asyncio.run(afterwards(url))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--turn"]:
        asyncio.run(turn(sys.argv[2], sys.argv[3]))
    else:
        main()
