"""Schema migrations: stored values that outlive the code that wrote them (pure).

Every record header carries the schema version its writer knew. A store's registry maps
a collection to upgrade steps, ``register("users", 1, fn)``: ``fn(data) -> data`` turns
schema 1 into 2. Writes stamp the newest version the registry reaches; reads of an older
value run the steps in order (in memory: ``Collection.upgrade`` or ``redistate migrate``
write it back); a value newer than the code knows raises SchemaError instead of being
read with fields this code would drop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from .errors import SchemaError
from .keys import check_kind

__all__ = ["Migrations", "kind_of"]

_ALIASES: Final = {
    "users": "user",
    "sessions": "session",
    "checkpoints": "checkpoint",
    "events": "event",
    "adk-events": "adk-event",
}
_MAX_SCHEMA: Final = 999_999_999  # 9 digits in the record header

Upgrade = Callable[[Any], Any]


def kind_of(name: str) -> str:
    """The kind a name means: ``users`` → ``user``, ``sessions`` → ``session``,
    ``checkpoints`` → ``checkpoint`` (task states), ``events`` → ``event`` (payloads),
    ``adk-events`` → ``adk-event`` (Google ADK events), a collection's own name as it
    is."""
    return _ALIASES.get(name, check_kind(name))


class Migrations:
    """Upgrade steps per record kind; ``store.migrations``."""

    __slots__ = ("_steps",)

    def __init__(self) -> None:
        self._steps: dict[str, dict[int, Upgrade]] = {}

    def register(self, kind: str, from_version: int, fn: Upgrade) -> None:
        """``fn(data) -> data`` upgrades ``kind`` (``"users"``, ``"sessions"``, a
        collection's name, ``"checkpoints"`` for task states, ``"events"`` for event
        payloads or ``"adk-events"`` for Google ADK events, as their JSON dicts) from
        ``from_version`` to ``from_version + 1``.

        Raises:
            ValueError: a version outside 1..999999998, a step registered twice, or
                steps with a gap (each must follow the one before).
            TypeError: ``fn`` is not callable.
        """
        name = kind_of(kind)
        if isinstance(from_version, bool) or not isinstance(from_version, int):
            raise ValueError(f"from_version must be an int, got {from_version!r:.40}")
        if not 1 <= from_version < _MAX_SCHEMA:
            limit = _MAX_SCHEMA - 1
            raise ValueError(f"from_version must be from 1 to {limit}, got {from_version}")
        if not callable(fn):
            raise TypeError(f"fn must be callable (data -> data), got {type(fn).__name__}")
        steps = self._steps.setdefault(name, {})
        if from_version in steps:
            raise ValueError(f"{kind!r} already has a step from version {from_version}")
        if steps and from_version != max(steps) + 1 and from_version != min(steps) - 1:
            raise ValueError(
                f"{kind!r} has steps from {min(steps)} to {max(steps)}: a step from "
                f"{from_version} would leave a gap"
            )
        steps[from_version] = fn

    def current(self, kind: str) -> int:
        """The schema ``kind`` is written with: one past its last step (1 without)."""
        steps = self._steps.get(kind)
        return max(steps) + 1 if steps else 1

    def upgrade(self, kind: str, version: int, data: Any, where: str) -> Any:
        """``data`` stored at ``version``, brought to :meth:`current`.

        Raises:
            SchemaError: the value is newer than this code knows, or older than the
                first registered step.
        """
        return self.upgrade_to(kind, version, self.current(kind), data, where)

    def upgrade_to(self, kind: str, version: int, target: int, data: Any, where: str) -> Any:
        """``data`` stored at ``version``, brought to ``target`` (at most :meth:`current`).

        Raises:
            SchemaError: as :meth:`upgrade`, or ``target`` is past what this code knows.
        """
        newest = self.current(kind)
        if version == target:
            return data
        if version > newest or target > newest:
            raise SchemaError(
                f"{where} has schema {max(version, target)}, newer than this code knows "
                f"({newest}): upgrade the code, or register the step from {newest}"
            )
        steps = self._steps.get(kind, {})
        for v in range(version, target):
            step = steps.get(v)
            if step is None:
                raise SchemaError(
                    f"{where} has schema {version}, but {kind!r} has no step from {v}"
                )
            data = step(data)
        return data
