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

The bearer token sent to a scheduler: the one its API note offers (a token it generated,
the only one it takes; this machine's schedulers, and an ``ssh://`` host's, read there),
else, when it needs one (its note says so, or no note of it is known: a URL elsewhere),
the target's own (:func:`explicit_token`: a fleet-file line's ``token-file=`` /
``token-env=``, else the command's ``--token-file`` / ``--token-env``, else
``$SYMPHONY_API_TOKEN``). A scheduler that needs no token is sent none.

Without targets the fleet is ``local`` plus the targets of the fleet file
(``<config dir>/fleet``): one target a line, optionally followed by ``name=NAME``,
``token-env=VAR`` or ``token-file=PATH``; ``#`` starts a comment.

:class:`Endpoint` is one scheduler found behind a target: where its API is and what to
send it (found by :mod:`symphony_tui.api.discovery`, which an attached console shares). The
resolvers are blocking (files, ``ssh``): the fleet runs them in threads.
"""

from __future__ import annotations

import codecs
import dataclasses
import ipaddress
import os
import re
import shlex
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from symphony_tui.api import announce, discovery
from symphony_tui.api.auth import find_control_token, is_loopback
from symphony_tui.api.discovery import Endpoint, local_endpoints, ssh_endpoints
from symphony_tui.api.ssh import parse_target
from symphony_tui.config.worker_hosts import HostSpec
from symphony_tui.paths import config_dir, workflow_in
from symphony_tui.text import one_line

TargetKind = Literal["workflow", "url", "ssh", "local"]
DEFAULT_TOKEN_ENV = "SYMPHONY_API_TOKEN"


class TargetError(ValueError):
    """A target that cannot be used as written (one line)."""


class TokenError(TargetError):
    """The token a target names cannot be had: its variable is unset, its file is missing,
    a directory, readable by others, empty or unreadable (one line). The operator's
    configuration, not the scheduler: nothing was asked of it."""


@dataclass(frozen=True)
class Target:
    """One target as the operator wrote it (``text``); ``name``: the project name the
    operator chose (None: the workflow's folder name); ``token_env`` / ``token_file``:
    where the bearer token of a scheduler behind it is, for one that needs a token its
    note does not offer (the module doc); ``line``: its line in the fleet file (None:
    given on the command line)."""

    kind: TargetKind
    text: str
    name: str | None = None
    token_env: str | None = None
    token_file: Path | None = None
    ssh: HostSpec | None = None
    line: int | None = dataclasses.field(default=None, compare=False)

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
    """One target (the module doc). Raises :class:`TargetError`, whatever ``text`` is."""
    raw = text.strip()
    if not raw:
        raise TargetError("an empty target")
    if name is not None and (not name or "/" in name or not name.isprintable() or " " in name):
        raise TargetError(
            f"{name!r}: a project name has no '/', no spaces and no control characters"
        )
    if raw == "local":
        return Target("local", raw, name, token_env, token_file)
    if raw.startswith("ssh://"):
        try:
            spec = parse_target(raw)
        except ValueError as exc:
            raise TargetError(str(exc)) from None
        return Target("ssh", spec.name, name, token_env, token_file, ssh=spec)
    if raw.startswith(("http://", "https://")):
        try:
            parts = urlsplit(raw)
        except ValueError as exc:  # an unclosed '[' of an IPv6 host
            raise TargetError(f"{raw!r} is not http(s)://HOST:PORT ({exc})") from None
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
    try:
        path = workflow_in(Path(raw).expanduser())
        found = path.resolve() if path.is_file() else None
    except (OSError, RuntimeError, ValueError) as exc:  # too long, ~nosuchuser, a NUL, a loop
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise TargetError(f"{raw!r}: {reason}") from None
    if found is None:
        raise TargetError(f"{raw!r}: no such workflow file")
    return Target("workflow", str(found), name, token_env, token_file)


def host_key(host: str) -> str:
    """``host`` as two URLs that name one address alike write it: lower case, without a
    final dot, an IP address in its shortest form (``0:0::1`` is ``::1``)."""
    host = host.strip().lower().rstrip(".")
    try:
        return ipaddress.ip_address(host).compressed
    except ValueError:
        return host


def identity(target: Target) -> tuple[object, ...]:
    """What two targets that watch the same thing share: a workflow's resolved path, a
    URL's scheme, host (:func:`host_key`) and port (the scheme's default when none is
    written), an ssh target's user, host and port (22 when none is written)."""
    if target.kind == "url":
        parts = urlsplit(target.text)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return ("url", parts.scheme, host_key(parts.hostname or ""), port)
    if target.ssh is not None:
        return ("ssh", target.ssh.user, target.ssh.hostname.lower(), target.ssh.port or 22)
    return (target.kind, target.text)


def fleet_file() -> Path:
    """``<config dir>/fleet``: the targets ``symphony-tui fleet`` adds to ``local``."""
    return config_dir() / "fleet"


OPTIONS = ("name", "token-env", "token-file")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_line(line: str, folder: Path) -> Target | None:
    """One line of a fleet file: a target and its options (the module doc); ``None`` for
    a blank or comment line. ``token-file`` is relative to ``folder``. Raises
    :class:`TargetError`, whatever ``line`` is."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError as exc:
        raise TargetError(str(exc)) from None
    if not words:
        return None
    options: dict[str, str] = {}
    for word in words[1:]:
        key, sep, value = word.partition("=")
        if not sep or key not in OPTIONS or not value:
            raise TargetError(f"{word!r}: an option is name=NAME, token-env=VAR or token-file=PATH")
        if key in options:
            raise TargetError(f"{key}= is given twice")
        options[key] = value
    env = options.get("token-env")
    if env is not None and not _ENV_NAME.fullmatch(env):
        raise TargetError(f"token-env={env!r}: not an environment variable's name")
    file = options.get("token-file")
    token_file = None
    if file is not None:
        try:
            token_file = folder / Path(file).expanduser()
        except (RuntimeError, ValueError) as exc:  # ~nosuchuser, a NUL
            raise TargetError(f"token-file={file!r}: {exc}") from None
    return parse(words[0], name=options.get("name"), token_env=env, token_file=token_file)


def read_fleet_file(path: Path) -> tuple[list[Target], list[str]]:
    """The targets of a fleet file and one notice a line for each line that was not taken
    as written (``<file>:<line>: ...``). A line that cannot be used (not a target, bad
    options, not UTF-8 text) and a line whose target an earlier line has already are
    skipped (``skipped: <why>``); a ``name=`` an earlier line has already is dropped, the
    line kept. A missing file is no targets, no notices."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], []
    except OSError as exc:
        return [], [f"{path}: {exc.strerror or exc}"]
    targets: list[Target] = []
    notices: list[str] = []
    lines: dict[tuple[object, ...], int] = {}
    names: dict[str, int] = {}
    for number, raw in enumerate(data.split(b"\n"), 1):
        where = f"{path}:{number}"
        if number == 1:
            raw = raw.removeprefix(codecs.BOM_UTF8)
        try:
            line = raw.removesuffix(b"\r").decode("utf-8")
        except UnicodeDecodeError as exc:
            notices.append(
                f"{where}: skipped: not UTF-8 text (byte 0x{raw[exc.start]:02x}, column {exc.start + 1})"
            )
            continue
        try:
            target = parse_line(line, path.parent)
        except TargetError as exc:
            notices.append(f"{where}: skipped: {one_line(exc, 300)}")
            continue
        if target is None:
            continue
        if target.kind == "local":
            notices.append(f"{where}: skipped: local is always watched beside the fleet file")
            continue
        first = lines.setdefault(identity(target), number)
        if first != number:
            notices.append(f"{where}: skipped: the same target as line {first} ({target.text})")
            continue
        if target.name is not None:
            named = names.setdefault(target.name, number)
            if named != number:
                notices.append(
                    f"{where}: name={target.name} is line {named}'s already: "
                    "dropped, this project is named by its target"
                )
                target = dataclasses.replace(target, name=None)
        targets.append(dataclasses.replace(target, line=number))
    return targets, notices


def read_token_file(path: Path) -> str:
    """The token in ``path``, a file only its owner may read or write (``0600``); raises
    :class:`TokenError` otherwise: missing, a directory, readable by others, empty or
    unreadable."""
    try:
        info = path.stat()
        if stat.S_ISDIR(info.st_mode):
            raise TokenError(f"token file {path} is a directory, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise TokenError(f"token file {path} is not a regular file")
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise TokenError(
                f"token file {path} must be readable by its owner only (chmod 600 {path})"
            )
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise TokenError(f"token file {path} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise TokenError(f"token file {path} cannot be read: {why}") from None
    if not token:
        raise TokenError(f"token file {path} is empty")
    return token


def workflow_endpoint(path: str, directory: Path | None = None) -> Endpoint:
    """The scheduler running the workflow at ``path`` on this machine
    (:func:`symphony_tui.api.discovery.workflow_endpoint`). Raises :class:`TargetError`."""
    try:
        return discovery.workflow_endpoint(path, directory)
    except discovery.NotRunning as exc:
        raise TargetError(str(exc)) from None


def url_endpoint(target: Target, environ: Mapping[str, str] | None = None) -> Endpoint:
    """The scheduler at an ``http(s)://`` target, its token as the module doc says (on
    loopback, this user's note of it also gives its control token and process). Raises
    :class:`TokenError` for a token the target names that cannot be had."""
    parts = urlsplit(target.text)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    local = parts.hostname is not None and is_loopback(parts.hostname)
    note = announce.note_for_port(announce.default_dir(), port) if local else None
    pid = note.get("pid") if note is not None else None
    workflow = note.get("workflow") if note is not None else None
    endpoint = Endpoint(
        key=target.text,
        workflow_path=workflow if isinstance(workflow, str) else "",
        url=target.text,
        api_port=port,
        token=announce.read_token(note) if note is not None else None,
        control=find_control_token(port) if local else None,
        pid=pid if isinstance(pid, int) else None,
        owner=announce.Owner.of(announce.default_dir(), pid) if isinstance(pid, int) else None,
        token_required=note.get("token_required") is True if note is not None else None,
    )
    return with_token(endpoint, target, environ)


def with_flags(target: Target, token_env: str | None, token_file: Path | None) -> Target:
    """``target`` with the command's ``--token-env`` / ``--token-file`` when it names no
    token of its own (a fleet-file line's option wins)."""
    if target.token_env is not None or target.token_file is not None:
        return target
    return dataclasses.replace(target, token_env=token_env, token_file=token_file)


def explicit_token(target: Target, environ: Mapping[str, str] | None = None) -> str | None:
    """The token ``target`` names: its ``token_file``, else the variable ``token_env``
    names, else ``$SYMPHONY_API_TOKEN`` (None: unset or empty). Raises
    :class:`TokenError` for a token file that cannot be used or a named variable unset."""
    env = os.environ if environ is None else environ
    if target.token_file is not None:
        return read_token_file(target.token_file)
    if target.token_env is not None:
        token = env.get(target.token_env, "").strip()
        if not token:
            raise TokenError(f"token: ${target.token_env} is not set")
        return token
    return env.get(DEFAULT_TOKEN_ENV, "").strip() or None


def with_token(
    endpoint: Endpoint, target: Target, environ: Mapping[str, str] | None = None
) -> Endpoint:
    """``endpoint`` with the token to send it: the one its note offers, else, when it
    needs one (``token_required`` true, or unknown: no note of it), the one ``target``
    names (:func:`explicit_token`); a scheduler that needs none is sent none. Reads a
    file: blocking. Raises :class:`TokenError` as :func:`explicit_token` does."""
    if endpoint.token is not None or endpoint.token_required is False:
        return endpoint
    token = explicit_token(target, environ)
    return endpoint if token is None else dataclasses.replace(endpoint, token=token)


def token_hint(target: Target) -> str:
    """What gives a scheduler behind ``target`` its token, for the line of a scheduler that
    refused this fleet for want of one: a fleet-file line's options, else the command's
    flags and the variable."""
    if target.line is not None:
        return f"token-env=VAR or token-file=PATH on line {target.line} of the fleet file"
    return f"symphony-tui fleet --token-env VAR or --token-file PATH, or ${DEFAULT_TOKEN_ENV}"


__all__ = [
    "Endpoint",
    "Target",
    "TargetError",
    "TokenError",
    "explicit_token",
    "fleet_file",
    "identity",
    "local_endpoints",
    "parse",
    "parse_line",
    "read_fleet_file",
    "read_token_file",
    "ssh_endpoints",
    "token_hint",
    "url_endpoint",
    "with_flags",
    "with_token",
    "workflow_endpoint",
]
