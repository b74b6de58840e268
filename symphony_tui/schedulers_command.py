"""``symphony-tui ps`` and ``symphony-tui stop``: this user's running schedulers.

``ps`` lists every live scheduler that left a note in this user's state folder
(``api/announce.py``: each console's and each headless scheduler; API ``-`` without one):
project, pid, since, running agents, approvals waiting, API address. The counts come from
each scheduler's ``GET /api/v1/snapshot`` (with the token its note points to); ``?`` when it
does not answer within a second.

``stop [WORKFLOW.md | PROJECT]`` finds one scheduler (the holder of the workflow's project
lock, or the one ``ps`` entry whose project, workflow or pid matches) and sends it SIGTERM:
the graceful stop, in which each worker's hooks get ``hooks.shutdown_grace_ms``. It waits
for the process to end (``--timeout``, default the grace plus a minute) and says so; it never
kills harder. Exit codes: 0 stopped, 1 nothing to stop / not stopped in time / not ours.
Before the signal it leaves a stop request (``announce.request_stop``: who, from where), so
the scheduler says what stopped it (:func:`stop_reason`) instead of a bare SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path, PurePosixPath
from typing import Any, TextIO

from symphony_tui.api import announce
from symphony_tui.text import one_line

_PROBE_S = 1.0
_DEFAULT_GRACE_S = 30.0


def _say(line: str, err: TextIO | None = None) -> None:
    print(f"symphony-tui: {one_line(line, 500)}", file=err or sys.stderr, flush=True)


#: Who sent this process's own ``stop_scheduler`` command (``stop_command_from``).
_stop_command_by: list[str] = []


def stop_command_from(by: str) -> None:
    """The SIGTERM this process sends itself next is a ``stop_scheduler`` command from
    ``by`` (``user@host via HTTP API from 127.0.0.1 ...``), an attached console's stop."""
    _stop_command_by[:] = [by]


def stop_reason(signal_name: str, directory: Path | None = None) -> str:
    """What stopped this scheduler on ``signal_name`` (``SIGTERM``, ``SIGINT``), one line
    for the event stream's ``stopping`` frame, the log and attached consoles:
    ``stopped by an attached console's stop (me@box via HTTP API from ...)``, ``stopped by
    `symphony-tui stop` from me@box`` (its request, :func:`run_stop`) or ``stopped by
    SIGTERM`` (``kill``, a service manager). Each stop command or request is told once."""
    if _stop_command_by:
        by = _stop_command_by.pop()
        return f"stopped by an attached console's stop ({by})"
    by = announce.take_stop_request(directory or announce.default_dir())
    if by is not None and signal_name == "SIGTERM":
        return f"stopped by `symphony-tui stop` from {by}"
    return f"stopped by {signal_name}"


def _counts(note: dict[str, Any]) -> tuple[int | None, int | None]:
    """(running agents, approvals waiting) from the scheduler's API, or (None, None)."""
    import httpx

    if not isinstance(note.get("port"), int):
        return None, None  # a headless scheduler without an API
    host = str(note.get("host") or "127.0.0.1")
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    headers = {}
    token = announce.read_token(note)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        response = httpx.get(
            f"http://{host}:{note['port']}/api/v1/snapshot", headers=headers, timeout=_PROBE_S
        )
        body = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        body = None
    if not isinstance(body, dict):
        return None, None
    running = body.get("running")
    approvals = body.get("approvals")
    return (
        len(running) if isinstance(running, list) else None,
        len(approvals) if isinstance(approvals, list) else None,
    )


def _address(note: dict[str, Any]) -> str:
    if not isinstance(note.get("port"), int):
        return "-"
    host = str(note.get("host") or "127.0.0.1")
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{note.get('port')}"


def run_ps(
    *, as_json: bool = False, out: TextIO | None = None, directory: Path | None = None
) -> int:
    """Print this user's live schedulers (the module doc); always 0."""
    out = out or sys.stdout
    rows = []
    for note in announce.live_notes(directory or announce.default_dir()):
        running, approvals = _counts(note)
        rows.append(
            {
                "project": note.get("project") or note.get("workflow") or "?",
                "workflow": note.get("workflow"),
                "pid": note.get("pid"),
                "since": note.get("started_at"),
                "running": running,
                "approvals": approvals,
                "api": _address(note),
            }
        )
    if as_json:
        for row in rows:
            out.write(json.dumps(row) + "\n")
        return 0
    if not rows:
        out.write("no scheduler of this user is running\n")
        return 0
    table = [("PROJECT", "PID", "SINCE", "RUNNING", "APPROVALS", "API")]
    for row in rows:
        table.append(
            (
                one_line(str(row["project"]), 60),
                str(row["pid"]),
                str(row["since"] or "?")[:19].replace("T", " "),
                "?" if row["running"] is None else str(row["running"]),
                "?" if row["approvals"] is None else str(row["approvals"]),
                row["api"],
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for r in table:
        out.write("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
        out.write("\n")
    return 0


def _from_workflow(path: Path) -> tuple[int | None, str, float | None, str | None]:
    """(owner pid or None, project key, hooks' grace in seconds, problem) for a workflow."""
    from symphony_tui.config.errors import WorkflowError
    from symphony_tui.config.workflow import load_workflow
    from symphony_tui.scheduler.project_lock import ProjectLockedError, check_free, project_key_for

    try:
        settings = load_workflow(path).settings
    except WorkflowError as exc:
        return None, "", None, str(exc)
    except OSError as exc:
        return None, "", None, f"missing_workflow_file: {path}: {exc.strerror or exc}"
    key = project_key_for(settings)
    grace = settings.hooks.shutdown_grace_ms / 1000.0
    try:
        check_free(key)
    except ProjectLockedError as exc:
        pid = exc.owner.get("pid")
        return (pid if isinstance(pid, int) else None), key, grace, None
    except OSError as exc:
        return None, key, grace, f"cannot read the project lock: {exc}"
    return None, key, grace, None


def run_stop(
    target: str | None,
    *,
    timeout: float | None = None,
    directory: Path | None = None,
    err: TextIO | None = None,
) -> int:
    """Stop one scheduler gracefully (the module doc). Returns the exit code."""
    from symphony_tui.paths import resolve_workflow_path

    grace: float | None = None
    path = resolve_workflow_path(target)
    pid: int | None = None
    why = ""
    if target is None or path.is_file():
        if not path.is_file():
            _say(f"stop: no WORKFLOW.md here ({path}); name one, or a project from `ps`", err)
            return 1
        pid, label, grace, problem = _from_workflow(path)
        if problem and target is None:
            _say(f"stop: {problem}", err)
            return 1
        why = problem or f"no scheduler runs {label}"
    listed = target is not None and any(
        n.get("project") == target for n in announce.live_notes(directory or announce.default_dir())
    )  # the project as `ps` shows it (``local:/home/me/proj/issues.yaml``) is no file
    if (
        pid is None
        and target is not None
        and not listed
        and _names_a_file(target)
        and not path.is_file()
    ):
        _say(
            f"stop: no workflow file at {path.absolute()}; name one, or a project or pid from `ps`",
            err,
        )
        return 1
    if pid is None and target is not None:  # a project, a workflow path or a pid from `ps`
        notes = announce.live_notes(directory or announce.default_dir())
        # a folder found its WORKFLOW.md: a note names that file
        named = str(path) if path.is_file() else None
        found = [
            n for n in notes if _matches(n, target) or (named is not None and _matches(n, named))
        ]
        if not found:
            _say(
                f"stop: {why or f'no running scheduler matches {target!r}'} "
                "(see `symphony-tui ps`)",
                err,
            )
            return 1
        if len(found) > 1:
            pids = ", ".join(f"{n.get('pid')} ({n.get('project')})" for n in found)
            _say(f"stop: {target!r} matches several schedulers: {pids}; name one", err)
            return 1
        pid = found[0]["pid"]
        label = str(found[0].get("project") or found[0].get("workflow") or f"pid {pid}")
    if not isinstance(pid, int):
        _say(f"stop: {why}", err)
        return 1
    from symphony_tui.scheduler.audit import local_operator

    notes_dir = directory or announce.default_dir()
    request = announce.request_stop(notes_dir, pid, local_operator())
    try:
        os.kill(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError) as exc:
        if request is not None:
            announce.remove(request)
        if isinstance(exc, PermissionError):
            _say(f"stop: the scheduler of {label} (pid {pid}) belongs to another user", err)
            return 1
        _say(f"stop: the scheduler of {label} (pid {pid}) has already ended", err)
        return 0
    bound = timeout if timeout is not None else (grace or _DEFAULT_GRACE_S) + 60.0
    _say(f"stopping the scheduler of {label} (pid {pid}; its hooks get their grace)…", err)
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if announce.ended(pid):
            _say(f"stopped the scheduler of {label} (pid {pid})", err)
            return 0
        time.sleep(0.1)
    _say(f"stop: pid {pid} still runs after {bound:g} s (its log says what it waits for)", err)
    return 1


def _names_a_file(target: str) -> bool:
    """A target written as a path (``WORKFLOW.md``, ``../proj/WORKFLOW.md``), not a project."""
    return "/" in target or target.lower().endswith(".md")


def _matches(note: dict[str, Any], target: str) -> bool:
    """The note's pid, its project key as ``ps`` shows it, its workflow file (the same
    file), or its folder's name, as the fleet names it (``proj`` for a workflow in
    ``/home/me/proj``, or ``local:/home/me/proj/issues.yaml``), never a piece of a name
    (``roj``): a stop ends agents, so a typo must not find a scheduler."""
    if target.isdigit():
        return note.get("pid") == int(target)
    project = note.get("project")
    if isinstance(project, str) and target == project:
        return True
    workflow = note.get("workflow")
    if isinstance(workflow, str) and _names_a_file(target):
        try:
            return Path(workflow).resolve() == Path(target).resolve()
        except OSError:
            return False
    folders = set()
    if isinstance(workflow, str) and workflow:
        folders.add(Path(workflow).parent.name)
    if isinstance(project, str) and "/" in project:  # ``local:/home/me/proj/issues.yaml``
        folders.add(PurePosixPath(project.partition(":")[2] or project).parent.name)
    return target in folders - {""}
