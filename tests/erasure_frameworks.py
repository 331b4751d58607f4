"""Agents SDK sessions and LangGraph threads registered to a user, for the erasure
tests (tests/_async/test_erasure.py and its sync twin call ``async_*`` / ``sync_*``):
the frameworks' own APIs differ between sync and async, so this file is not generated.
"""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import ModelRequest, UserPromptPart

from redistate import AsyncStore, Store
from redistate.adk import RedistateSessionService
from redistate.agents import RedistateSession
from redistate.claude import RedistateSessionStore
from redistate.langgraph import RedisStateSaver, RedistateStore
from redistate.pydantic_ai import RedistateConversationStore

ITEMS: list[Any] = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]


class State(TypedDict):
    steps: Annotated[list[str], operator.add]


def graph(saver: RedisStateSaver) -> Any:
    builder = StateGraph(State)
    for name in ("plan", "write"):
        builder.add_node(name, lambda state, name=name: {"steps": [name]})
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "write")
    builder.add_edge("write", END)
    return builder.compile(checkpointer=saver)


def config(thread_id: str, user: str) -> Any:
    """How LangGraph apps commonly pass a user id along with the thread."""
    return {"configurable": {"thread_id": thread_id, "user_id": user}}


async def async_framework_data(store: AsyncStore, user: str) -> None:
    """An Agents SDK session ``<user>-a1``, a LangGraph thread ``<user>-g1``, a
    LangGraph store namespace ``(<user>-m, facts)``, an ADK session of app
    ``<user>-app`` with ``user:`` state, a Claude Agent SDK session and a Pydantic AI
    conversation."""
    session = RedistateSession(f"{user}-a1", store=store, user=user)
    await session.add_items(ITEMS)
    saver = RedisStateSaver(store, user_key="user_id")
    out = await graph(saver).ainvoke({"steps": []}, config(f"{user}-g1", user))
    assert out["steps"] == ["plan", "write"]
    memory = RedistateStore(store, user=lambda ns: ns[0].removesuffix("-m"))
    await memory.aput((f"{user}-m", "facts"), "likes", {"tea": True}, ttl=10)
    await adk_data(store, user)
    await claude_data(store, user)
    await pydantic_ai_data(store, user)


async def erase(store: Store | AsyncStore, user: str) -> Any:
    """``store.users.erase(user)`` from async code, over either store."""
    if isinstance(store, AsyncStore):
        return await store.users.erase(user)
    return await asyncio.to_thread(store.users.erase, user)


async def claude_data(store: Store | AsyncStore, user: str) -> None:
    """A Claude Agent SDK session of project ``<user>-proj`` with a subagent
    transcript, registered to ``user``."""
    sessions = RedistateSessionStore(store, user=user)
    key: Any = {"project_key": f"{user}-proj", "session_id": "c1"}
    await sessions.append(key, [{"type": "user", "uuid": "e1"}])
    sub: Any = {**key, "subpath": "subagents/a"}
    await sessions.append(sub, [{"type": "x"}])


async def pydantic_ai_data(store: Store | AsyncStore, user: str) -> None:
    """A Pydantic AI conversation ``<user>-p1`` in scope ``user``, registered to it."""
    conversations = RedistateConversationStore(store, register_scopes=True)
    conversation = Conversation(conversation_id=f"{user}-p1")
    conversation.messages.append(ModelRequest(parts=[UserPromptPart(content="hi")]))
    await conversations.save(conversation, scope=user)


async def adk_data(store: Store | AsyncStore, user: str) -> None:
    """An ADK session with session, ``user:`` and ``app:`` state, registered to ``user``."""
    service = RedistateSessionService(store, register_users=True)
    await service.create_session(
        app_name=f"{user}-app",
        user_id=user,
        session_id="s1",
        state={"turn": 1, "user:name": user, "app:model": "m"},
    )


def sync_framework_data(store: Store, user: str) -> None:
    """:func:`async_framework_data` through the sync APIs."""
    session = RedistateSession(f"{user}-a1", store=store, user=user)
    asyncio.run(session.add_items(ITEMS))  # the SDK's sessions are async only
    saver = RedisStateSaver(store, user_key="user_id")
    out = graph(saver).invoke({"steps": []}, config(f"{user}-g1", user))
    assert out["steps"] == ["plan", "write"]
    memory = RedistateStore(store, user=lambda ns: ns[0].removesuffix("-m"))
    memory.put((f"{user}-m", "facts"), "likes", {"tea": True}, ttl=10)
    asyncio.run(adk_data(store, user))  # ADK's session services are async only
    asyncio.run(claude_data(store, user))  # and the Claude SDK's session stores
    asyncio.run(pydantic_ai_data(store, user))  # and pydantic-ai's conversation stores
