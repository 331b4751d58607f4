"""The LangGraph checkpointer on plain Redis (``pip install 'redistate[langgraph]'``);
the code is in redistate/adapters/langgraph (see its README.md)."""

from .adapters.langgraph.saver import RedisStateSaver

__all__ = ["RedisStateSaver"]
