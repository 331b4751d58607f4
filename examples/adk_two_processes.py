"""Google ADK on redistate: an agent's conversation is started by one process and
continued by another, which finds the history and the state the first one left.

The model is a scripted fake (no network, no API key): on "my name is ..." it calls the
agent's ``remember`` tool, which sets ``user:name`` (shared by every session of the
user); asked "what is my name?" it answers from the instruction, which ADK fills in
from that state. Each turn runs in a fresh process with its own Runner.

python examples/adk_two_processes.py    # a local server is started (redistate[embedded])
REDISTATE_URL=redis://localhost:6379/0 python examples/adk_two_processes.py
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
from collections.abc import AsyncGenerator, Iterator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from redistate import AsyncStore
from redistate.adk import RedistateSessionService

APP, USER, SESSION = "assistant", "ada", "chat-1"


class ScriptedModel(BaseLlm):
    """A model that needs no network: it reads the request and answers by rule."""

    model: str = "scripted"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        parts = llm_request.contents[-1].parts if llm_request.contents else None
        last = parts[-1] if parts else None
        text = (last.text or "") if last is not None else ""
        if last is not None and last.function_response is not None:
            name = (last.function_response.response or {})["name"]
            reply = types.Part(text=f"Nice to meet you, {name}.")
        elif found := re.search(r"my name is (\w+)", text, re.I):
            call = types.FunctionCall(name="remember", args={"name": found.group(1)})
            reply = types.Part(function_call=call)
        else:
            instruction = str(llm_request.config.system_instruction or "")
            known = re.search(r"The user's name is (\w+)\.", instruction)
            answer = f"Your name is {known.group(1)}." if known else "I don't know your name."
            reply = types.Part(text=answer)
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=0, candidates_token_count=0, total_token_count=0
        )
        yield LlmResponse(content=types.Content(role="model", parts=[reply]), usage_metadata=usage)


def remember(name: str, tool_context: ToolContext) -> dict[str, Any]:
    """Remember the user's name across all their sessions."""
    tool_context.state["user:name"] = name
    tool_context.state["turns_with_tools"] = tool_context.state.get("turns_with_tools", 0) + 1
    return {"name": name}


AGENT = LlmAgent(
    name="assistant",
    model=ScriptedModel(),
    instruction="You are helpful. The user's name is {user:name?}.",
    tools=[remember],
)


async def turn(url: str, text: str) -> None:
    """One turn in this process: a Runner over a fresh store and session service."""
    async with AsyncStore.from_url(url, namespace="adk-example") as store:
        sessions = RedistateSessionService(store, ttl=3600)
        session = await sessions.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        if session is None:
            await sessions.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        else:
            print(f"pid {os.getpid()}: found {len(session.events)} events of the session")
        runner = Runner(agent=AGENT, app_name=APP, session_service=sessions)
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for event in runner.run_async(user_id=USER, session_id=SESSION, new_message=message):
            for part in (event.content.parts or []) if event.content else []:
                if part.text:
                    print(f"pid {os.getpid()}: {event.author}: {part.text}")


@contextlib.contextmanager
def server() -> Iterator[str]:
    url = os.environ.get("REDISTATE_URL")
    if url:
        yield url
        return
    from redistate.cli._embedded import embedded_url

    with embedded_url() as found:
        yield found


async def reset(url: str) -> None:
    async with AsyncStore.from_url(url, namespace="adk-example") as store:
        sessions = RedistateSessionService(store)
        await sessions.delete_session(app_name=APP, user_id=USER, session_id=SESSION)


async def report(url: str) -> None:
    async with AsyncStore.from_url(url, namespace="adk-example") as store:
        sessions = RedistateSessionService(store)
        session = await sessions.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        assert session is not None
        print(f"events stored: {len(session.events)}")
        print(f"state: {dict(sorted(session.state.items()))}")


def main() -> None:
    with server() as url:
        asyncio.run(reset(url))  # a fresh conversation each time
        for text in ("Hello, my name is Ada.", "What is my name?"):
            done = subprocess.run([sys.executable, __file__, "--turn", url, text], check=False)
            print(f"turn process exit code: {done.returncode}")
        asyncio.run(report(url))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--turn"]:
        asyncio.run(turn(sys.argv[2], sys.argv[3]))
    else:
        main()
