"""The ACP client's file methods, served inside one issue's workspace only
(https://agentclientprotocol.com/protocol/file-system).

* ``fs/read_text_file {path, line?, limit?}`` -> ``{content}``: the whole file, or
  ``limit`` lines from line ``line`` (1-based); at most :data:`READ_LIMIT_BYTES` of text
  (a larger answer is refused, naming the size, so the agent reads it in parts).
* ``fs/write_text_file {path, content}`` -> ``{}``: creates the file and its folders,
  replaces it whole; at most :data:`WRITE_LIMIT_BYTES`.

Paths are resolved (symbolic links followed) and must lie inside the workspace: any
other path, a relative one included, is refused with :class:`MethodRefused`, whose
JSON-RPC error the agent reads. Disk work runs in a thread.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

READ_LIMIT_BYTES = 1024 * 1024
WRITE_LIMIT_BYTES = 8 * 1024 * 1024
INVALID_PARAMS = -32602
#: ACP's "resource not found".
NOT_FOUND = -32002


class MethodRefused(Exception):
    """A client method refused (a file or a terminal request): ``code`` and ``message``
    of the JSON-RPC error the agent reads."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class WorkspaceFiles:
    """``fs/*`` for the workspace ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def inside(self, raw: Any) -> Path:
        """The resolved path ``raw`` names; raises :class:`MethodRefused` unless it is an
        absolute path inside the workspace."""
        if not isinstance(raw, str) or not raw:
            raise MethodRefused(INVALID_PARAMS, "path must be a non-empty string")
        if not os.path.isabs(raw):
            raise MethodRefused(INVALID_PARAMS, f"path {raw!r} is not absolute")
        path = Path(raw).resolve()
        if path != self.root and not path.is_relative_to(self.root):
            raise MethodRefused(INVALID_PARAMS, f"path {raw} is outside the workspace {self.root}")
        return path

    async def read(self, params: dict[str, Any]) -> dict[str, Any]:
        path = self.inside(params.get("path"))
        line, limit = params.get("line"), params.get("limit")
        for name, value in (("line", line), ("limit", limit)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise MethodRefused(INVALID_PARAMS, f"{name} must be an integer")
        return {"content": await asyncio.to_thread(self._read, path, line, limit)}

    def _read(self, path: Path, line: int | None, limit: int | None) -> str:
        try:
            if line is None and limit is None:
                size = path.stat().st_size
                if size > READ_LIMIT_BYTES:
                    raise MethodRefused(
                        INVALID_PARAMS,
                        f"{path} is {size} bytes, over the {READ_LIMIT_BYTES}-byte read cap: "
                        "read it in parts (line, limit)",
                    )
                return path.read_text(encoding="utf-8", errors="replace")
            first = max(1, line or 1)
            out: list[str] = []
            used = 0
            with path.open(encoding="utf-8", errors="replace") as f:
                for number, text in enumerate(f, start=1):
                    if number < first:
                        continue
                    if limit is not None and len(out) >= limit:
                        break
                    used += len(text.encode())
                    if used > READ_LIMIT_BYTES:
                        raise MethodRefused(
                            INVALID_PARAMS,
                            f"lines {first}.. of {path} pass the {READ_LIMIT_BYTES}-byte read "
                            "cap: ask for fewer (limit)",
                        )
                    out.append(text)
            return "".join(out)
        except FileNotFoundError:
            raise MethodRefused(NOT_FOUND, f"file not found: {path}") from None
        except IsADirectoryError:
            raise MethodRefused(INVALID_PARAMS, f"{path} is a directory") from None
        except OSError as e:
            raise MethodRefused(INVALID_PARAMS, f"cannot read {path}: {e.strerror or e}") from None

    async def write(self, params: dict[str, Any]) -> dict[str, Any]:
        path = self.inside(params.get("path"))
        content = params.get("content")
        if not isinstance(content, str):
            raise MethodRefused(INVALID_PARAMS, "content must be a string")
        data = content.encode()
        if len(data) > WRITE_LIMIT_BYTES:
            raise MethodRefused(
                INVALID_PARAMS,
                f"content is {len(data)} bytes, over the {WRITE_LIMIT_BYTES}-byte write cap",
            )
        await asyncio.to_thread(self._write, path, data)
        return {}

    def _write(self, path: Path, data: bytes) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        except OSError as e:
            raise MethodRefused(INVALID_PARAMS, f"cannot write {path}: {e.strerror or e}") from None
