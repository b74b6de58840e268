"""What ``symphony-tui fleet`` watches (docs/fleet.md): its targets, and the schedulers
each one names.

A target is one of

* a ``WORKFLOW.md`` path: the scheduler running that workflow on this machine for this
  user, found through this user's API notes (:mod:`symphony_tui.api.announce`: a note's
  ``workflow``), else through the project's lock;
* an ``http(s)://HOST:PORT`` URL: that scheduler's API, its bearer token from an
  environment variable or a file readable by its owner only (``0600``); a loopback URL of
  one of this user's schedulers needs neither (its note names its token);
* ``ssh://[user@]host[:port]``: every scheduler of that user on that host, each through
  its own SSH forward (:mod:`symphony_tui.api.ssh`);
* ``local``: every scheduler of this user on this machine (what ``symphony-tui ps`` lists).

Without targets the fleet is ``local`` plus the targets of the fleet file
(``<config dir>/fleet``): one target a line, optionally followed by ``name=NAME``,
``token-env=VAR`` or ``token-file=PATH``; ``#`` starts a comment.

:class:`Endpoint` is one scheduler found behind a target: where its API is and what to
send it. The resolvers are blocking (files, ``ssh``): the fleet runs them in threads.
"""

from __future__ import annotations

import os
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from symphony_tui.api import announce
from symphony_tui.api.auth import find_control_token, is_loopback, read_control_token
from symphony_tui.api.ssh import discover, parse_target
from symphony_tui.config.worker_hosts import HostSpec
from symphony_tui.paths import config_dir

TargetKind = Literal["workflow", "url", "ssh", "local"]
DEFAULT_TOKEN_ENV = "SYMPHONY_API_TOKEN"


class TargetError(ValueError):
    """A target that cannot be used as written (one line)."""


@dataclass(frozen=True)
class Target:
    """One target as the operator wrote it (``text``); ``name``: the project name the
    operator chose (None: the workflow's folder name); ``token_env`` / ``token_file``:
    where an ``http(s)://`` target's bearer token is."""

    kind: TargetKind
    text: str
    name: str | None = None
    token_env: str | None = None
    token_file: Path | None = None
    ssh: HostSpec | None = None

    @property
    def machine(self) -> str | None:
        """The host an ``ssh://`` or a non-loopback URL target names (None: this machine)."""
        if self.ssh is not None:
            return self.ssh.hostname
        if self.kind == "url":
            host = urlsplit(self.text).hostname or ""
            return None if is_loopback(host) else host
        return None


def parse(
    text: str,
    *,
    name: str | None = None,
    token_env: str | None = None,
    token_file: Path | None = None,
) -> Target:
    """One target (the module doc). Raises :class:`TargetError`."""
    raw = text.strip()
    if not raw:
        raise TargetError("an empty target")
    if name is not None and (not name or "/" in name or any(c.isspace() for c in name)):
        raise TargetError(f"{name!r}: a project name has no '/' and no spaces")
    if raw == "local":
        return Target("local", raw, name)
    if raw.startswith("ssh://"):
        try:
            spec = parse_target(raw)
        except ValueError as exc:
            raise TargetError(str(exc)) from None
        return Target("ssh", spec.name, name, ssh=spec)
    if raw.startswith(("http://", "https://")):
        parts = urlsplit(raw)
        try:
            parts.port  # noqa: B018 (a bad port raises here)
        except ValueError:
            raise TargetError(f"{raw!r}: the port is not a number (1-65535)") from None
        if not parts.hostname or parts.path not in ("", "/") or parts.query or parts.fragment:
            raise TargetError(f"{raw!r} is not http(s)://HOST:PORT")
        return Target("url", raw.rstrip("/"), name, token_env, token_file)
    if "://" in raw:
        raise TargetError(
            f"{raw!r}: a target is a WORKFLOW.md path, http(s)://HOST:PORT, "
            "ssh://[user@]host[:port] or local"
        )
    path = Path(raw).expanduser()
    if path.is_dir():
        path = path / "WORKFLOW.md"
    if not path.is_file():
        raise TargetError(f"{raw}: no such workflow file")
    return Target("workflow", str(path.resolve()), name)


def fleet_file() -> Path:
    """``<config dir>/fleet``: the targets ``symphony-tui fleet`` adds to ``local``."""
    return config_dir() / "fleet"


def read_fleet_file(path: Path) -> tuple[list[Target], list[str]]:
    """The targets of a fleet file and one line per line that could not be used
    (``<file>:<line>: <reason>``). A missing file is no targets, no problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return [], []
    except (OSError, UnicodeDecodeError) as exc:
        return [], [f"{path}: {exc}"]
    targets: list[Target] = []
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:
            problems.append(f"{path}:{number}: {exc}")
            continue
        if not words:
            continue
        options: dict[str, str] = {}
        try:
            for word in words[1:]:
                key, sep, value = word.partition("=")
                if not sep or key not in ("name", "token-env", "token-file") or not value:
                    raise TargetError(
                        f"{word!r}: an option is name=NAME, token-env=VAR or token-file=PATH"
                    )
                options[key] = value
            file = options.get("token-file")
            if file is not None and not Path(file).expanduser().is_absolute():
                file = str(path.parent / Path(file).expanduser())
            targets.append(
                parse(
                    words[0],
                    name=options.get("name"),
                    token_env=options.get("token-env"),
                    token_file=Path(file).expanduser() if file else None,
                )
            )
        except TargetError as exc:
            problems.append(f"{path}:{number}: {exc}")
    return targets, problems


def read_token_file(path: Path) -> str:
    """The token in ``path``, which only its owner may read or write (``0600``); raises
    :class:`TargetError` otherwise, or when it is empty or unreadable."""
    try:
        info = path.stat()
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise TargetError(
                f"{path}: a token file must be readable by its owner only (chmod 600 {path})"
            )
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise TargetError(f"{path}: {exc.strerror or exc}") from None
    if not token:
        raise TargetError(f"{path}: the token file is empty")
    return token


@dataclass(frozen=True)
class Endpoint:
    """One scheduler behind a target. ``key``: what stays the same when that scheduler is
    restarted (its workflow file, else its address), so a restarted scheduler takes its old
    row; ``pid``: its process when known; ``api_port``: the port on its host (the forward's
    far end for ``ssh://``); ``url``: where this machine reaches it (``None`` for ssh: the
    forward makes it)."""

    key: str
    workflow_path: str
    url: str | None
    api_port: int | None
    token: str | None = None
    control: str | None = None
    pid: int | None = None
    owner: announce.Owner | None = None

    @property
    def folder_name(self) -> str:
        """The workflow's folder name (the repository's), else the address."""
        if self.workflow_path:
            return Path(self.workflow_path).parent.name or "project"
        if self.url:
            parts = urlsplit(self.url)
            return f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)
        return f"port-{self.api_port}"


def _note_url(note: dict[str, Any]) -> str | None:
    if not isinstance(note.get("port"), int):
        return None
    host = str(note.get("host") or "127.0.0.1")
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{note['port']}"


def _local_endpoint(note: dict[str, Any], directory: Path) -> Endpoint | None:
    url = _note_url(note)
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
    )


def local_endpoints(directory: Path | None = None) -> list[Endpoint]:
    """Every scheduler of this user on this machine that serves an API (oldest first)."""
    where = directory or announce.default_dir()
    found = []
    for note in announce.live_notes(where):
        endpoint = _local_endpoint(note, where)
        if endpoint is not None:
            found.append(endpoint)
    return found


def workflow_endpoint(path: str, directory: Path | None = None) -> Endpoint:
    """The scheduler running the workflow at ``path`` (resolved) on this machine: the live
    note naming that workflow, else the holder of its project lock. Raises
    :class:`TargetError` when none runs, or it serves no API this user can reach."""
    where = directory or announce.default_dir()
    for endpoint in local_endpoints(where):
        if endpoint.workflow_path and _same_file(endpoint.workflow_path, path):
            return endpoint
    pid = _lock_holder(Path(path))
    if pid is not None:
        note = announce.read_note(where, pid)
        held = _local_endpoint(note, where) if note is not None else None
        if held is None:
            raise TargetError(f"the scheduler of {path} (pid {pid}) serves no API this user reads")
        return Endpoint(
            path, path, held.url, held.api_port, held.token, held.control, held.pid, held.owner
        )
    raise TargetError(f"no scheduler runs {path} (start it, e.g. `symphony-tui {path}`)")


def _same_file(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


def _lock_holder(path: Path) -> int | None:
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


def url_endpoint(target: Target, environ: dict[str, str] | None = None) -> Endpoint:
    """The scheduler at an ``http(s)://`` target: its token from ``target.token_file``,
    else ``target.token_env`` (default ``$SYMPHONY_API_TOKEN``), else, on loopback, this
    user's note of it (which also gives its control token and process). Raises
    :class:`TargetError` for an unusable token file or a named variable that is unset."""
    env = os.environ if environ is None else environ
    parts = urlsplit(target.text)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    local = parts.hostname is not None and is_loopback(parts.hostname)
    note = announce.note_for_port(announce.default_dir(), port) if local else None
    token: str | None
    if target.token_file is not None:
        token = read_token_file(target.token_file)
    elif target.token_env is not None:
        token = env.get(target.token_env, "").strip() or None
        if token is None:
            raise TargetError(f"{target.text}: ${target.token_env} is not set")
    else:
        token = env.get(DEFAULT_TOKEN_ENV, "").strip() or None
    if token is None and note is not None:
        token = announce.read_token(note)
    pid = note.get("pid") if note is not None else None
    workflow = note.get("workflow") if note is not None else None
    return Endpoint(
        key=target.text,
        workflow_path=workflow if isinstance(workflow, str) else "",
        url=target.text,
        api_port=port,
        token=token,
        control=find_control_token(port) if local else None,
        pid=pid if isinstance(pid, int) else None,
        owner=announce.Owner.of(announce.default_dir(), pid) if isinstance(pid, int) else None,
    )


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
            )
        )
    return found
