"""Run the real codex app-server in isolation against a local fake model (docs/protocols.md
"Codex app-server").

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
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

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
    model_url: str,
    trusted: Iterable[Path] = (),
    *,
    model: str = "fake-model",
    features: Iterable[str] = (),
) -> str:
    """The ``config.toml`` text for a fake provider at ``model_url`` (``.../v1``).

    ``features``: codex feature flags to switch on (``[features] <name> = true``), e.g.
    ``request_permissions_tool``, which gives the model the tool that makes codex send
    ``item/permissions/requestApproval``.
    """
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
    names = list(features)
    if names:
        lines += ["", "[features]"] + [f"{name} = true" for name in names]
    return "\n".join(lines) + "\n"


def make_codex_home(
    dir: Path, model_url: str, trusted: Iterable[Path] = (), *, features: Iterable[str] = ()
) -> dict[str, str]:
    """Write ``dir/config.toml`` and return the env overlay to launch codex with.

    The overlay holds ``CODEX_HOME``, ``FAKE_API_KEY`` and proxy settings that send any
    stray outbound call to a closed loopback port (docs/protocols.md "Loopback and the fake
    model").
    """
    dir.mkdir(parents=True, exist_ok=True)
    (dir / "config.toml").write_text(codex_config_toml(model_url, trusted, features=features))
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


def generate_schema(codex_bin: Path, out: Path) -> Path:
    """Run ``codex app-server generate-json-schema --experimental --out out``; returns ``out``.

    ``--experimental`` is needed: ``dynamicTools`` and ``capabilities.experimentalApi``-gated
    fields are missing from the default bundle. Raises ``RuntimeError`` on failure.
    """
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [str(codex_bin), "app-server", "generate-json-schema", "--experimental", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CODEX_HOME": str(out / ".codex-home")},
    )
    if proc.returncode != 0 or not (out / "ClientRequest.json").is_file():
        raise RuntimeError(f"generate-json-schema failed ({proc.returncode}): {proc.stderr[-500:]}")
    return out


class CodexSchema:
    """Validates messages a client sends against the schema bundle of the pinned binary.

    Requests are checked against their method's variant of ``ClientRequest.json``, and
    their top-level ``params`` keys must be declared (the bundle allows unknown keys, so
    a misspelt field would otherwise pass). Notifications use ``ClientNotification.json``.
    Responses to server requests must match one of the ``*Response.json`` of the methods
    in ``ServerRequest.json``. Needs ``jsonschema`` (the ``testing`` extra).
    """

    def __init__(self, directory: Path) -> None:
        import jsonschema  # the `testing` extra: only tests build a CodexSchema

        self._js = jsonschema
        self._dir = directory
        self._requests = self._variants("ClientRequest.json")
        self._notifications = self._variants("ClientNotification.json")
        self._responses: list[dict[str, Any]] = []
        self._validators: dict[str, Any] = {}
        server = json.loads((directory / "ServerRequest.json").read_text())
        for v in server["oneOf"]:
            ref = (v["properties"].get("params") or {}).get("$ref", "")
            name = ref.rsplit("/", 1)[-1].removesuffix("Params") + "Response.json"
            if (directory / name).is_file():
                self._responses.append(json.loads((directory / name).read_text()))

    def _variants(self, name: str) -> dict[str, dict[str, Any]]:
        bundle = json.loads((self._dir / name).read_text())
        defs = bundle.get("definitions", {})
        out = {}
        for v in bundle["oneOf"]:
            for method in v["properties"]["method"].get("enum", []):
                out[method] = {"definitions": defs, **v}
        return out

    def _validator(self, key: str, schema: dict[str, Any]) -> Any:
        # Building a validator for the big bundle costs ~0.3 s; reuse one per method.
        v = self._validators.get(key)
        if v is None:
            v = self._validators[key] = self._js.Draft7Validator(schema)
        return v

    def validate(self, msg: dict[str, Any]) -> None:
        """Raise ``AssertionError`` / ``jsonschema.ValidationError`` when ``msg`` is invalid."""
        if "method" in msg and "id" in msg:
            schema = self._requests.get(msg["method"])
            assert schema is not None, f"unknown client request method {msg['method']!r}"
            self._validator(msg["method"], schema).validate(msg)
            ref = (schema["properties"].get("params") or {}).get("$ref", "")
            params_def = schema["definitions"].get(ref.rsplit("/", 1)[-1], {})
            declared = set(params_def.get("properties", {}))
            if declared and isinstance(msg.get("params"), dict):
                unknown = set(msg["params"]) - declared
                assert not unknown, f"{msg['method']}: undeclared params {sorted(unknown)}"
        elif "method" in msg:
            schema = self._notifications.get(msg["method"])
            assert schema is not None, f"unknown client notification {msg['method']!r}"
            self._js.validate(msg, schema)
        elif "error" in msg:
            assert isinstance(msg["error"].get("code"), int), msg
            assert isinstance(msg["error"].get("message"), str), msg
        else:
            result = msg.get("result")
            for schema in self._responses:
                if self._js.Draft7Validator(schema).is_valid(result):
                    return
            raise AssertionError(f"response fits no server-request response schema: {msg}")

    def validate_all(self, messages: Iterable[dict[str, Any]]) -> int:
        """Validate each message; returns how many were checked."""
        n = 0
        for m in messages:
            self.validate(m)
            n += 1
        return n
