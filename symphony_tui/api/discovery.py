"""Finding a scheduler by what names it rather than by its address: the one running a
workflow on this machine (this user's API notes, :mod:`symphony_tui.api.announce`, else the
project's lock), every one of this user's here, or every one on an ssh host
(:func:`symphony_tui.api.ssh.discover`). A scheduler started again takes another pid and,
unless its port is configured, another port: a console or fleet that named it by its
workflow or host finds it again here. Blocking (files, ``ssh``): callers run it in a
thread."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from symphony_tui.api import announce
from symphony_tui.api.auth import read_control_token
from symphony_tui.api.ssh import discover
from symphony_tui.config.worker_hosts import HostSpec


class NotRunning(ValueError):
    """No scheduler this user can reach runs what was named (one line)."""


@dataclass(frozen=True)
class Endpoint:
    """One scheduler found (behind a fleet's target, or what an attached console was named).
    ``key``: what stays the same when that scheduler is
    restarted (its workflow file, else its address), so a restarted scheduler takes its old
    row; ``pid``: its process when known; ``api_port``: the port on its host (the forward's
    far end for ``ssh://``); ``url``: where this machine reaches it (``None`` for ssh: the
    forward makes it); ``token``: the bearer token its note offers (one it generated);
    ``token_required``: whether it needs a bearer token, as its note says (None: no note
    of it is known)."""

    key: str
    workflow_path: str
    url: str | None
    api_port: int | None
    token: str | None = None
    control: str | None = None
    pid: int | None = None
    owner: announce.Owner | None = None
    token_required: bool | None = None

    @property
    def folder_name(self) -> str:
        """The workflow's folder name (the repository's), else the address."""
        if self.workflow_path:
            return Path(self.workflow_path).parent.name or "project"
        if self.url:
            parts = urlsplit(self.url)
            return f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)
        return f"port-{self.api_port}"


def note_url(note: dict[str, Any]) -> str | None:
    """Where this machine reaches the API a note announces (a wildcard host as
    ``127.0.0.1``); None for a note without a port."""
    if not isinstance(note.get("port"), int):
        return None
    host = str(note.get("host") or "127.0.0.1")
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{note['port']}"


def local_endpoint(note: dict[str, Any], directory: Path) -> Endpoint | None:
    """The scheduler a note in ``directory`` announces, with its tokens; None when it
    serves no API."""
    url = note_url(note)
    pid = note.get("pid")
    if url is None or not isinstance(pid, int):
        return None
    workflow = note.get("workflow")
    control_file = note.get("control_token_file")
    return Endpoint(
        key=str(workflow) if isinstance(workflow, str) and workflow else url,
        workflow_path=str(workflow) if isinstance(workflow, str) else "",
        url=url,
        api_port=int(note["port"]),
        token=announce.read_token(note),
        control=read_control_token(control_file) if isinstance(control_file, str) else None,
        pid=pid,
        owner=announce.Owner.of(directory, pid),
        token_required=note.get("token_required") is True,
    )


def local_endpoints(directory: Path | None = None) -> list[Endpoint]:
    """Every scheduler of this user on this machine that serves an API (oldest first)."""
    where = directory or announce.default_dir()
    found = []
    for note in announce.live_notes(where):
        endpoint = local_endpoint(note, where)
        if endpoint is not None:
            found.append(endpoint)
    return found


def workflow_endpoint(path: str, directory: Path | None = None) -> Endpoint:
    """The scheduler running the workflow at ``path`` (resolved) on this machine: the live
    note naming that workflow, else the holder of its project lock. Raises
    :class:`NotRunning` when none runs, or it serves no API this user can reach."""
    where = directory or announce.default_dir()
    for endpoint in local_endpoints(where):
        if endpoint.workflow_path and same_file(endpoint.workflow_path, path):
            return endpoint
    pid = lock_holder(Path(path))
    if pid is not None:
        note = announce.read_note(where, pid)
        held = local_endpoint(note, where) if note is not None else None
        if held is None:
            raise NotRunning(f"the scheduler of {path} (pid {pid}) serves no API this user reads")
        return Endpoint(
            path,
            path,
            held.url,
            held.api_port,
            held.token,
            held.control,
            held.pid,
            held.owner,
            held.token_required,
        )
    raise NotRunning(f"no scheduler runs {path} (start it, e.g. `symphony-tui {path}`)")


def same_file(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


def lock_holder(path: Path) -> int | None:
    """The pid holding the project lock of the workflow at ``path`` (None: free, or the
    workflow does not load)."""
    from symphony_tui.config.errors import WorkflowError
    from symphony_tui.config.workflow import load_workflow
    from symphony_tui.scheduler.project_lock import ProjectLockedError, check_free, project_key_for

    try:
        key = project_key_for(load_workflow(path).settings)
        check_free(key)
    except ProjectLockedError as exc:
        pid = exc.owner.get("pid")
        return pid if isinstance(pid, int) else None
    except (WorkflowError, OSError):
        return None
    return None


def ssh_endpoints(target: HostSpec) -> list[Endpoint]:
    """Every scheduler serving an API on an ssh host for that user, with the tokens it
    keeps there (``ssh`` runs once; raises :class:`~symphony_tui.hosts.ssh.SshError`)."""
    found = []
    for note in discover(target):
        workflow = note.get("workflow")
        pid = note.get("pid")
        found.append(
            Endpoint(
                key=str(workflow) if isinstance(workflow, str) and workflow else f":{note['port']}",
                workflow_path=str(workflow) if isinstance(workflow, str) else "",
                url=None,
                api_port=int(note["port"]),
                token=note.get("api_token"),
                control=note.get("control_token"),
                pid=pid if isinstance(pid, int) else None,
                token_required=note.get("token_required") is True,
            )
        )
    return found
