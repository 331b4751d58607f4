"""Claude Agent SDK session transcripts on plain Redis (``pip install 'redistate[claude]'``);
the code is in redistate/adapters/claude (see its README.md)."""

from .adapters.claude.store import RedistateSessionStore

__all__ = ["RedistateSessionStore"]
