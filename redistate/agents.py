"""The OpenAI Agents SDK session on plain Redis (``pip install
'redistate[openai-agents]'``); the code is in redistate/adapters/agents (see its
README.md)."""

from .adapters.agents.session import RedistateSession

__all__ = ["RedistateSession"]
