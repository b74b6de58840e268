"""Validation of ACP messages against the protocol's published JSON schema.

The schema ships in the npm package ``@zed-industries/agent-client-protocol`` (pinned
:data:`ACP_SCHEMA_VERSION`, installed by ``.ci/run`` into the cache; found through
``$SYMPHONY_ACP_SCHEMA`` or that cache). Each ``$defs`` entry names its method
(``x-method``): ``<Name>Request`` / ``<Name>Notification`` are a method's params,
``<Name>Response`` its result.
"""

from __future__ import annotations

import json
import os
import pwd
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from tests.real_programs import missing

ACP_SCHEMA_VERSION = "0.4.5"
CACHED = (
    Path(pwd.getpwuid(os.getuid()).pw_dir)
    / ".cache/symphony-tui"
    / f"acp-schema-{ACP_SCHEMA_VERSION}"
    / "node_modules/@zed-industries/agent-client-protocol/schema/schema.json"
)


def schema_path() -> Path:
    env = os.environ.get("SYMPHONY_ACP_SCHEMA")
    for candidate in (Path(env) if env else None, CACHED):
        if candidate is not None and candidate.is_file():
            return candidate
    missing(f"the ACP schema {ACP_SCHEMA_VERSION}", "set SYMPHONY_ACP_SCHEMA")


@cache
def _schema(path: str) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def _definition(method: str, suffixes: tuple[str, ...]) -> str:
    defs = _schema(str(schema_path()))["$defs"]
    names = [n for n, d in defs.items() if d.get("x-method") == method and n.endswith(suffixes)]
    assert len(names) == 1, f"{method}: no single schema definition ({names})"
    return names[0]


def validate(value: Any, name: str) -> None:
    schema = _schema(str(schema_path()))
    jsonschema.Draft202012Validator({"$ref": f"#/$defs/{name}", "$defs": schema["$defs"]}).validate(
        value
    )


def validate_exchange(messages: list[tuple[str, dict[str, Any]]]) -> int:
    """Validate a conversation: ``(side, message)`` pairs in order, side ``client`` or
    ``agent`` (who wrote it). Every message must be JSON-RPC 2.0; a request's or
    notification's params must match its method's definition, a result its method's
    response. Returns how many messages were checked."""
    asked: dict[tuple[str, Any], str] = {}  # (side, id) -> method
    for side, msg in messages:
        assert msg.get("jsonrpc") == "2.0", msg
        method = msg.get("method")
        if isinstance(method, str):
            if "id" in msg:
                asked[(side, msg["id"])] = method
            validate(msg.get("params"), _definition(method, ("Request", "Notification")))
        elif "result" in msg:
            other = "agent" if side == "client" else "client"
            method = asked.pop((other, msg["id"]))
            validate(msg["result"], _definition(method, ("Response",)))
        else:
            assert isinstance(msg.get("error"), dict) and isinstance(msg["error"].get("code"), int)
    return len(messages)


def validate_sent(sent: list[dict[str, Any]]) -> int:
    """Validate what a client wrote (its side only): requests and notifications against
    their method's params; a response against the one client response definition it
    matches (the requests it answers are the agent's, not in ``sent``)."""
    defs = _schema(str(schema_path()))["$defs"]
    answers = [n for n, d in defs.items() if d.get("x-side") == "client" and n.endswith("Response")]
    for msg in sent:
        assert msg.get("jsonrpc") == "2.0", msg
        method = msg.get("method")
        if isinstance(method, str):
            validate(msg.get("params"), _definition(method, ("Request", "Notification")))
        elif "result" in msg:
            errors = []
            for name in answers:
                try:
                    validate(msg["result"], name)
                    break
                except jsonschema.ValidationError as e:
                    errors.append(f"{name}: {e.message}")
            else:
                raise AssertionError(f"no client response matches {msg}: {errors}")
        else:
            assert isinstance(msg.get("error"), dict) and isinstance(msg["error"].get("code"), int)
    return len(sent)
