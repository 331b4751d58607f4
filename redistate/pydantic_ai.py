"""Pydantic AI conversations on plain Redis (``pip install 'redistate[pydantic-ai]'``);
the code is in redistate/adapters/pydantic_ai (see its README.md)."""

from .adapters.pydantic_ai.store import RedistateConversationStore

__all__ = ["RedistateConversationStore"]
