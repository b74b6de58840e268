"""``symphony-tui doctor``: run each start-up check and say how it went (issue: CLI).

Checks: the workflow file loads; dispatch settings validate (spec §6.3); the workspace root
is writable; the agent command is found; the tracker answers a candidate fetch; the project
lock is free. Exit 0 when every check passes, 1 otherwise.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


def _check_workspace_root(root: Path) -> Check:
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".doctor-"):
            pass
    except OSError as exc:
        return Check("workspace root", False, f"{root}: {exc.strerror or exc}")
    return Check("workspace root", True, f"{root} is writable")


# ``${NAME:-default}`` / ``${NAME-default}``: shell parameter defaults, which
# ``os.path.expandvars`` leaves alone (the demo's command starts with one).
_DEFAULTED = re.compile(r"\$\{(\w+)(:?)-([^}]*)\}")


def _expand_word(word: str, env: Mapping[str, str] | None = None) -> str:
    """The program word of a command as ``bash`` would expand it, without running anything:
    ``${NAME:-default}``, ``${NAME-default}``, ``$NAME``, ``${NAME}`` and a leading ``~``."""
    env = os.environ if env is None else env

    def default(match: re.Match[str]) -> str:
        name, colon, fallback = match.groups()
        value = env.get(name)
        if value is None or (colon and not value):
            return fallback
        return value

    return os.path.expanduser(os.path.expandvars(_DEFAULTED.sub(default, word)))


def _check_agent_command(settings) -> Check:
    backend = settings.agent.backend
    if backend == "codex":
        command = settings.codex.command
    elif backend == "openhands":
        command = settings.openhands.command or ""
        if not command and settings.openhands.base_url:
            return Check(
                "agent command", True, f"openhands server at {settings.openhands.base_url}"
            )
    else:
        command = settings.opencode.command or ""
        if not command and settings.opencode.base_url:
            return Check("agent command", True, f"opencode server at {settings.opencode.base_url}")
    try:
        words = shlex.split(command)
    except ValueError as exc:
        return Check("agent command", False, f"cannot parse {command!r}: {exc}")
    if not words:
        return Check("agent command", False, f"{backend}: no command configured")
    exe = _expand_word(words[0])
    found = shutil.which(exe) if "/" not in exe else (exe if os.access(exe, os.X_OK) else None)
    if found is None:
        return Check("agent command", False, f"{exe!r} not found on PATH (from {command!r})")
    return Check("agent command", True, f"{backend}: {found}")


async def _check_tracker(store) -> Check:
    from symphony_tui.runtime import create_tracker
    from symphony_tui.trackers.base import TrackerError

    try:
        tracker = create_tracker(store)
    except TrackerError as exc:
        return Check("tracker", False, str(exc))
    try:
        issues = await asyncio.wait_for(tracker.fetch_candidate_issues(), timeout=35)
    except TrackerError as exc:
        return Check("tracker", False, str(exc))
    except TimeoutError:
        return Check("tracker", False, "no answer within 35s")
    finally:
        await tracker.aclose()
    return Check(
        "tracker", True, f"{store.current.settings.tracker.kind}: {len(issues)} candidate issues"
    )


def _check_lock(settings) -> Check:
    from symphony_tui.scheduler.project_lock import ProjectLock, ProjectLockedError, project_key_for

    try:
        lock = ProjectLock.acquire(project_key_for(settings))
    except ProjectLockedError as exc:
        return Check("project lock", False, str(exc))
    lock.release()
    return Check("project lock", True, "no other scheduler runs this project")


def run_doctor(workflow: str | None, out: TextIO | None = None) -> int:
    from symphony_tui.config.errors import WorkflowError
    from symphony_tui.config.store import WorkflowStore
    from symphony_tui.config.validate import validate_dispatch
    from symphony_tui.config.workflow import resolve_workflow_path

    out = out or sys.stdout
    checks: list[Check] = []
    path = resolve_workflow_path(workflow)
    store = WorkflowStore(path)
    try:
        wf = store.load_initial()
        checks.append(Check("workflow", True, f"{path} loaded"))
    except WorkflowError as exc:
        checks.append(Check("workflow", False, str(exc)))
        wf = None
    if wf is not None:
        settings = wf.settings
        errors = validate_dispatch(settings)
        checks.append(
            Check("dispatch settings", not errors, "; ".join(errors) or "valid (spec §6.3)")
        )
        later: list[Callable[[], Check]] = [
            lambda: _check_workspace_root(settings.workspace_root),
            lambda: _check_agent_command(settings),
            lambda: _check_lock(settings),
        ]
        checks.extend(fn() for fn in later)
        if not errors:
            checks.append(asyncio.run(_check_tracker(store)))
    for c in checks:
        mark = "ok  " if c.ok else "FAIL"
        out.write(f"[{mark}] {c.name}: {c.detail}\n")
    failed = [c for c in checks if not c.ok]
    if failed:
        out.write(f"{len(failed)} of {len(checks)} checks failed\n")
    else:
        out.write(f"all {len(checks)} checks passed\n")
    return 1 if failed else 0
