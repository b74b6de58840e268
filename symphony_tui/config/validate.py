"""Dispatch preflight validation (spec §6.3).

Run at start-up (a failure fails start-up) and before every dispatch (a failure skips
dispatch for that tick; reconciliation still runs). Each problem is one line, prefixed
with the spec's error category where there is one (§11.4).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

from symphony_tui.config import rest_trackers
from symphony_tui.config.settings import Settings, TrackerSettings
from symphony_tui.config.worker_hosts import names_codex_program

SUPPORTED_TRACKERS = ("linear", "local", "github", *rest_trackers.KINDS)
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def root_problem(root: Path) -> str | None:
    """One line when the workspace root cannot be a folder here: it, or the nearest of its
    parents that exists, is not a folder."""
    for at in (root, *root.parents):
        if at.exists():
            if at.is_dir():
                return None
            what = "it" if at == root else f"its parent {at}"
            return (
                f"workspace_root_unavailable: workspace.root {root} cannot be a folder: "
                f"{what} is a file (move it away, or set workspace.root elsewhere)"
            )
    return None


def validate_dispatch(settings: Settings) -> list[str]:
    """Problems that prevent polling or launching workers; ``[]`` when dispatch may go on."""
    problems: list[str] = []
    tracker = settings.tracker
    kind = (tracker.kind or "").strip().lower()
    if not kind:
        problems.append(
            "missing_tracker_kind: tracker.kind is not set (use one of: "
            + ", ".join(SUPPORTED_TRACKERS)
            + ")"
        )
    elif kind not in SUPPORTED_TRACKERS:
        problems.append(
            f"unsupported_tracker_kind: tracker.kind {tracker.kind!r} is not supported "
            f"(use one of: {', '.join(SUPPORTED_TRACKERS)})"
        )
    elif kind == "linear":
        if not tracker.api_key:
            problems.append(f"missing_tracker_api_key: {_missing_key(tracker, 'api_key')}")
        if not tracker.project_slug:
            problems.append("missing_tracker_project_slug: tracker.project_slug is not set")
    elif kind == "github":
        problems.extend(_github_problems(tracker))
    elif kind in rest_trackers.KINDS:
        problems.extend(rest_trackers.problems(tracker))
    elif kind == "local":
        if not tracker.path:
            problems.append("local_tracker_file: tracker.path is not set for tracker.kind local")
        elif not Path(tracker.path).is_file():
            problems.append(f"local_tracker_file: tracker.path {tracker.path} is not a file")

    if not settings.worker.enabled:
        problem = root_problem(Path(settings.workspace.root))
        if problem:
            problems.append(problem)

    backend = settings.agent.backend
    if settings.worker.enabled and backend in ("openhands", "opencode"):
        # On worker hosts the managed server is started on each host, in the workspace
        # (agents/remote_server.py); a base_url names one server of this machine.
        server = getattr(settings, backend)
        if server.base_url:
            problems.append(
                f"invalid_agent_config: {backend}.base_url is one server here; with "
                f"worker.ssh_hosts the server starts on each host ({backend}.command)"
            )
        elif not server.command and not all(
            settings.worker.command_for(h, backend, "") or settings.worker.server_on(h, backend)
            for h in settings.worker.ssh_hosts
        ):
            problems.append(
                f"invalid_agent_config: worker.ssh_hosts with agent.backend {backend} needs "
                f"{backend}.command (or worker.hosts.<host>.commands.{backend} or "
                f".base_url.{backend} on every host)"
            )
    if backend == "codex" and not settings.codex.command.strip():
        problems.append("invalid_agent_config: codex.command is empty")
    elif backend == "codex" and settings.worker.enabled:
        problems.extend(_exec_server_problems(settings))
    elif (
        backend == "acp"
        and not settings.acp.command.strip()
        and not (
            settings.worker.enabled
            and all(settings.worker.command_for(h, "acp", "") for h in settings.worker.ssh_hosts)
        )
    ):
        problems.append("invalid_agent_config: agent.backend acp needs acp.command")
    elif settings.worker.enabled:
        pass  # checked above
    elif backend == "openhands" and not (settings.openhands.base_url or settings.openhands.command):
        problems.append(
            "invalid_agent_config: agent.backend openhands needs openhands.base_url "
            "or openhands.command"
        )
    elif backend == "opencode" and not (settings.opencode.base_url or settings.opencode.command):
        problems.append(
            "invalid_agent_config: agent.backend opencode needs opencode.base_url "
            "or opencode.command"
        )
    return problems


def _github_problems(tracker: TrackerSettings) -> list[str]:
    """``tracker.kind: github`` (trackers/github): repo, token, api_url and, without a board
    or state labels, states limited to ``open`` / ``closed`` (as the reference's adapter)."""
    problems: list[str] = []
    if not tracker.repo:
        problems.append(
            "missing_github_repo: tracker.repo is not set (owner/name, or $GITHUB_REPO)"
        )
    elif not _REPO.match(tracker.repo):
        problems.append(f"invalid_github_repo: tracker.repo {tracker.repo!r} is not owner/name")
    if not tracker.api_key:
        problems.append(f"missing_github_token: {_missing_key(tracker, 'token')}")
    url = urlsplit(tracker.api_url)
    local = url.scheme == "http" and url.hostname in _LOOPBACK
    if not url.hostname or (url.scheme != "https" and not local):
        problems.append(f"invalid_github_api_url: tracker.api_url {tracker.api_url!r} is not https")
    if tracker.project is None and not tracker.state_labels:
        bad = [s for s in tracker.active_states if s.strip().lower() != "open"]
        bad += [s for s in tracker.terminal_states if s.strip().lower() != "closed"]
        if bad:
            problems.append(
                f"invalid_github_states: {', '.join(map(repr, bad))}: without tracker.project "
                "or tracker.state_labels the states are open (active) and closed (terminal)"
            )
    return problems


def _missing_key(tracker: TrackerSettings, key: str) -> str:
    """Why ``tracker.<key>`` (the tracker's credential) is missing, naming the environment
    variable it was to be read from (``tracker.api_key_env``)."""
    what = "no GitHub token: tracker.token" if key == "token" else "tracker.api_key"
    name = tracker.api_key_env
    if name is None:
        return f"{what} is empty"
    how = "is set but empty" if name in os.environ else "is not set"
    return f"{what} is empty: ${name} {how} in the environment (export it, or set tracker.{key}: $OTHER_VAR)"


def _exec_server_problems(settings: Settings) -> list[str]:
    """Hosts in ``codex_mode: exec-server`` whose codex command has no word ``app-server``
    to take the program of (agents/codex/exec_server.py)."""
    out = []
    for host in settings.worker.ssh_hosts:
        if settings.worker.codex_mode_for(host) != "exec-server":
            continue
        command = settings.worker.command_for(host, "codex", settings.codex.command)
        if not names_codex_program(command):
            out.append(
                f"invalid_agent_config: worker host {host} in codex_mode exec-server needs a "
                f"codex command with the word app-server after its program (got {command!r})"
            )
    return out
