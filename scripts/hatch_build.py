"""Build hook: a wheel is built only from a current Lua index.

An installed package trusts ``redistate/core/_lua_index.py`` to name its function
library (only a checkout compares it with the files): a wheel built from a stale one
would call a server's old functions under the new code. Editable installs are a
checkout, and are not stopped.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class LuaIndexCheck(BuildHookInterface):  # type: ignore[misc]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable":
            return
        done = subprocess.run(
            [sys.executable, "scripts/lua_index.py", "--check"],
            cwd=self.root,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"refusing to build: {done.stdout}{done.stderr}".strip())
