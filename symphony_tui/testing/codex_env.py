"""Run the real codex app-server in isolation against a local fake model (PROTOCOLS.md "Codex").

:func:`find_codex_bin` locates the pinned binary; :func:`make_codex_home` writes a
``CODEX_HOME`` whose ``config.toml`` points codex at a :class:`FakeModelServer` and returns
the environment to launch codex with (all traffic on loopback).

Trust (measured with 0.171.0): ``[projects."<dir>"] trust_level = "trusted"`` applies to that
exact directory only. Trusting a parent (the workspace root) does NOT cover workspaces created
under it later: a ``thread/start`` without overrides in ``<root>/ISSUE-1`` still resolves to a
``readOnly`` sandbox, while trusting ``<root>/ISSUE-1`` itself gives ``workspaceWrite``. The
codex backend therefore does not depend on trust: it always sends ``approvalPolicy`` and
``sandbox`` on ``thread/start`` (and ``sandboxPolicy`` on ``turn/start`` when configured),
which take precedence over the trust-derived defaults. Pass ``trusted`` only when launching
codex by hand in a known directory.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

CODEX_VERSION = "0.171.0"
CODEX_CACHE_BIN = (
    Path.home() / ".cache" / "symphony-tui" / f"codex-{CODEX_VERSION}" / "node_modules/.bin/codex"
)
FAKE_API_KEY = "fake-key"


def find_codex_bin() -> Path | None:
    """The codex binary: ``$SYMPHONY_CODEX_BIN``, then the pinned cache install, then PATH."""
    env = os.environ.get("SYMPHONY_CODEX_BIN")
    if env and Path(env).is_file():
        return Path(env)
    if CODEX_CACHE_BIN.is_file():
        return CODEX_CACHE_BIN
    found = shutil.which("codex")
    return Path(found) if found else None


def _toml_str(value: str) -> str:
    # JSON string escaping is valid TOML basic-string escaping for paths and URLs.
    return json.dumps(value)


def codex_config_toml(
    model_url: str, trusted: Iterable[Path] = (), *, model: str = "fake-model"
) -> str:
    """The ``config.toml`` text for a fake provider at ``model_url`` (``.../v1``)."""
    lines = [
        f"model = {_toml_str(model)}",
        'model_provider = "fake"',
        "check_for_update_on_startup = false",
        "",
        "[model_providers.fake]",
        'name = "fake"',
        f"base_url = {_toml_str(model_url)}",
        'wire_api = "responses"',
        'env_key = "FAKE_API_KEY"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
    ]
    for p in trusted:
        lines += ["", f"[projects.{_toml_str(str(Path(p).resolve()))}]", 'trust_level = "trusted"']
    return "\n".join(lines) + "\n"


def make_codex_home(dir: Path, model_url: str, trusted: Iterable[Path] = ()) -> dict[str, str]:
    """Write ``dir/config.toml`` and return the env overlay to launch codex with.

    The overlay holds ``CODEX_HOME``, ``FAKE_API_KEY`` and proxy settings that send any
    stray outbound call to a closed loopback port (PROTOCOLS.md: keep traffic on loopback).
    """
    dir.mkdir(parents=True, exist_ok=True)
    (dir / "config.toml").write_text(codex_config_toml(model_url, trusted))
    proxy = "http://127.0.0.1:9"
    return {
        "CODEX_HOME": str(dir),
        "FAKE_API_KEY": FAKE_API_KEY,
        "HTTP_PROXY": proxy,
        "HTTPS_PROXY": proxy,
        "http_proxy": proxy,
        "https_proxy": proxy,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
