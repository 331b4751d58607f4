"""Google ADK sessions on plain Redis (``pip install 'redistate[adk]'``); the code is in
redistate/adapters/adk (see its README.md)."""

from .adapters.adk.service import RedistateSessionService

__all__ = ["RedistateSessionService"]
