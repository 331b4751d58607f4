"""LangGraph on plain Redis (``pip install 'redistate[langgraph]'``): the checkpointer
and the long-term memory store; the code is in redistate/adapters/langgraph (see its
README.md)."""

from .adapters.langgraph.basestore import RedistateStore
from .adapters.langgraph.saver import RedisStateSaver

__all__ = ["RedisStateSaver", "RedistateStore"]
