"""``symphony-tui doctor``: run each start-up check and say how it went.

First a line naming the specification revision followed (:mod:`symphony_tui.spec`).
Checks: the workflow file loads; dispatch settings validate (spec §6.3); the workspace root
could be made (nothing is created); the agent command is found; the tracker answers a
candidate fetch; whether the project's scheduler already runs (information: a console then
attaches to it). Then the paths a run would use. A front-matter key
nothing reads is a ``[warn]`` line (not a failure). Exit 0 when every check passes, 1
otherwise.
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

from symphony_tui.observability.redact import redact, redact_values

TRACKER_TIMEOUT_S = 35.0
AGENT_TIMEOUT_S = 20.0


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    warn: bool = False  # a warning line: shown, never a failure
    # The detail is this program's own words (names settings and variables, quotes no
    # outside text): only registered secret values are masked, never a key's name.
    own: bool = False


def _check_workspace_root(root: Path) -> Check:
    """Whether a run could make its workspaces in ``root``, without creating anything: an
    existing folder must be writable, else the nearest existing parent must be."""
    root = Path(root)
    if root.exists():
        if not root.is_dir():
            return Check("workspace root", False, f"{root} is not a folder")
        if not os.access(root, os.W_OK | os.X_OK):
            return Check("workspace root", False, f"{root}: not writable")
        return Check("workspace root", True, f"{root} is writable")
    parent = root.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        return Check("workspace root", False, f"{root} cannot be created: {parent} is not writable")
    return Check("workspace root", True, f"{root} will be created (in {parent}, writable)")


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
    """The agent's program is found (not started: see :func:`_check_agent_starts`)."""
    backend = settings.agent.backend
    if backend in ("codex", "acp"):
        command = settings.codex.command if backend == "codex" else settings.acp.command
    else:
        cfg = settings.openhands if backend == "openhands" else settings.opencode
        command = cfg.command or ""
        if not command and cfg.base_url:
            return Check("agent command", True, f"{backend} server at {cfg.base_url}")
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


async def _check_agent_starts(settings, env: Mapping[str, str], timeout_s: float) -> str:
    """Start the agent as a run would and return what answered, within ``timeout_s``:
    codex and acp: the agent's ``initialize`` answer (no thread or session is started); openhands /
    opencode: the server's health check (a managed server is launched with a throwaway
    state folder, then stopped). Raises ``AgentError`` or ``TimeoutError``."""
    from symphony_tui.agents.base import AgentError

    backend = settings.agent.backend
    cwd = Path(settings.workspace_root)
    if not cwd.is_dir():
        cwd = Path(settings.workflow_dir)
    if backend == "codex":
        from symphony_tui.agents.codex.probe import probe_initialize

        child_env = {**env, **settings.codex.env}
        info = await probe_initialize(settings.codex.command, cwd, child_env, timeout_s)
        agent = info.get("userAgent") or "no userAgent"
        return f"answered initialize ({agent})"
    if backend == "acp":
        from symphony_tui.agents.acp.session import JsonRpc2, initialize_params
        from symphony_tui.agents.codex.probe import probe_initialize

        child_env = {**env, **settings.acp.env}
        info = await probe_initialize(
            settings.acp.command,
            cwd,
            child_env,
            timeout_s,
            params=initialize_params(local=True),
            connection=JsonRpc2,
        )
        agent = info.get("agentInfo") if isinstance(info.get("agentInfo"), dict) else {}
        name = " ".join(str(agent.get(k)) for k in ("name", "version") if agent.get(k))
        return f"answered initialize (ACP {info.get('protocolVersion')}, {name or 'no agentInfo'})"
    with tempfile.TemporaryDirectory(prefix="symphony-doctor-") as state:
        if backend == "openhands":
            from symphony_tui.agents.openhands import OpenHandsBackend

            server = OpenHandsBackend(lambda: settings, env=env, state_dir=Path(state))
            check = server.check_server()
        elif backend == "opencode":
            from symphony_tui.agents.opencode import OpenCodeBackend

            server = OpenCodeBackend(lambda: settings, env=env, state_dir=Path(state))
            check = server.check_server(cwd)
        else:
            raise AgentError("launch_failed", f"unknown agent.backend {backend!r}")
        try:
            url = await asyncio.wait_for(check, timeout=timeout_s)
        finally:
            await server.aclose()
    return f"server at {url} is healthy"


def _agent_check(settings, raw: dict, timeout_s: float) -> Check:
    """``agent command``: the program is found, then it starts and answers in time."""
    found = _check_agent_command(settings)
    if not found.ok:
        return found
    from symphony_tui.agents.base import AgentError
    from symphony_tui.runtime import scheduler_secret_names

    secrets = scheduler_secret_names(raw)
    env = {k: v for k, v in os.environ.items() if k not in secrets}
    try:
        answer = asyncio.run(_check_agent_starts(settings, env, timeout_s))
    except AgentError as exc:
        return Check("agent command", False, f"{found.detail}: does not start: {exc.message}")
    except TimeoutError:
        return Check("agent command", False, f"{found.detail}: no answer within {timeout_s:g}s")
    return Check("agent command", True, f"{found.detail}; {answer}")


async def _check_tracker(store, timeout_s: float = TRACKER_TIMEOUT_S) -> list[Check]:
    """The candidate fetch, then (a tracker that can say so: ``config_problems``) whether
    the configured states and fields exist there."""
    from symphony_tui.runtime import create_tracker
    from symphony_tui.trackers.base import TrackerError

    try:
        tracker = create_tracker(store)
    except TrackerError as exc:
        return [Check("tracker", False, str(exc))]
    checks: list[Check] = []
    try:
        issues = await asyncio.wait_for(tracker.fetch_candidate_issues(), timeout=timeout_s)
        kind = store.current.settings.tracker.kind
        checks.append(Check("tracker", True, f"{kind}: {len(issues)} candidate issues"))
        problems_of = getattr(tracker, "config_problems", None)
        if problems_of is not None:
            problems = await asyncio.wait_for(problems_of(), timeout=timeout_s)
            detail = "; ".join(problems) or "every configured state and field exists there"
            checks.append(Check("tracker states", not problems, detail))
    except TrackerError as exc:
        checks.append(Check("tracker", False, str(exc)))
    except TimeoutError:
        checks.append(Check("tracker", False, f"no answer within {timeout_s:g}s"))
    finally:
        await tracker.aclose()
    return checks


def _check_lock(settings) -> Check:
    from symphony_tui.scheduler.project_lock import ProjectLockedError, check_free_for

    try:
        check_free_for(settings)  # the project's and the workspace root's lock
    except ProjectLockedError as exc:
        return Check("project lock", True, _running_scheduler(exc.owner))
    except OSError as exc:
        return Check("project lock", False, f"cannot read the lock file: {exc}")
    return Check("project lock", True, "no other scheduler runs this project")


def _running_scheduler(owner: Mapping[str, object]) -> str:
    """The project's scheduler runs (its lock's ``owner`` note): not a failure, since
    ``symphony-tui WORKFLOW.md`` attaches to it. Its pid, host, start and API address (from
    this user's own note of that process, ``api/announce.py``), one line."""
    from symphony_tui.api import announce

    pid = owner.get("pid")
    host = owner.get("host") or "unknown host"
    started = str(owner.get("started_at") or "")[:19].replace("T", " ")
    since = f" since {started} UTC" if started else ""
    note = announce.read_note(announce.default_dir(), pid) if isinstance(pid, int) else None
    if note is not None and isinstance(note.get("port"), int):
        api = f"API http://{note.get('host') or '127.0.0.1'}:{note['port']}"
        after = "`symphony-tui WORKFLOW.md` attaches to it, `symphony-tui stop` ends it"
    elif note is not None:
        api, after = "no API", "`symphony-tui stop` ends it"
    else:
        api, after = "API not this user's", "only its own user can attach to it or stop it"
    who = f"pid {pid} on {host}" if pid else "its owner not recorded yet"
    return f"this project's scheduler runs ({who}{since}, {api}): {after}"


def _print_paths(settings, workflow: Path, out: TextIO) -> None:
    """The files a run of ``workflow`` would use (nothing is created)."""
    from symphony_tui.paths import project_paths, project_rows, user_paths
    from symphony_tui.scheduler.project_lock import project_key_for

    project = project_paths(project_key_for(settings), settings.workspace_root, workflow)
    out.write("paths a run would use:\n")
    for label, value in [*user_paths(), *project_rows(project)]:
        out.write(f"  {label:<11} {value}\n")


def run_doctor(
    workflow: str | None, out: TextIO | None = None, *, timeout: float | None = None
) -> int:
    """Run the checks and print them to ``out``; ``timeout`` (seconds) bounds the agent and
    tracker checks. Each check's line is written (and flushed) as soon as it is known: a
    slow tracker or agent check does not hold back the lines before it, in a pipe too.
    Returns the exit code (0 all passed, 1 otherwise)."""
    from symphony_tui.config.errors import WorkflowError
    from symphony_tui.config.store import WorkflowStore
    from symphony_tui.config.validate import validate_dispatch
    from symphony_tui.paths import resolve_workflow_path
    from symphony_tui.spec import spec_revision

    out = out or sys.stdout
    checks: list[Check] = []

    def add(*found: Check) -> None:
        for c in found:
            checks.append(c)
            mark = "warn" if c.warn else "ok  " if c.ok else "FAIL"
            line = f"[{mark}] {c.name}: {c.detail}"
            # An outside answer (tracker, agent, YAML error) may quote a credential anywhere.
            out.write((redact_values(line) if c.own else redact(line)) + "\n")
        out.flush()

    out.write(f"follows the {spec_revision()}\n")
    path = resolve_workflow_path(workflow)
    store = WorkflowStore(path)
    try:
        wf = store.load_initial()
        add(Check("workflow", True, f"{path} loaded"))
        add(*(Check("workflow", True, w, warn=True, own=True) for w in wf.warnings))
    except WorkflowError as exc:
        add(Check("workflow", False, str(exc)))
        wf = None
    if wf is not None:
        settings = wf.settings
        errors = validate_dispatch(settings)
        detail = "; ".join(errors) or "valid (spec §6.3)"
        add(Check("dispatch settings", not errors, detail, own=True))
        later: list[Callable[[], Check]] = [
            lambda: _check_workspace_root(settings.workspace_root),
            lambda: _agent_check(settings, wf.raw, timeout or AGENT_TIMEOUT_S),
            lambda: _check_lock(settings),
        ]
        for fn in later:
            add(fn())
        if not errors:
            add(*asyncio.run(_check_tracker(store, timeout or TRACKER_TIMEOUT_S)))
    if wf is not None:
        _print_paths(wf.settings, path, out)
    failed = [c for c in checks if not c.ok]
    checks = [c for c in checks if not c.warn]
    if failed:
        out.write(f"{len(failed)} of {len(checks)} checks failed\n")
    else:
        out.write(f"all {len(checks)} checks passed\n")
    return 1 if failed else 0
