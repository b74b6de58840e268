"""Bearer-token authentication for the HTTP API (RFC 6750 ``Authorization: Bearer``).

Rules (docs/http-api.md, "Authentication"):

* A server bound to a non-loopback address needs a token; so does a loopback one when
  ``server.require_token`` is true. Loopback without it stays token-free.
* The token comes from the environment variable named by ``server.auth_token_env``. When
  that names a variable that is unset or empty, the server refuses to start
  (:class:`TokenError`). When no variable is named and a token is needed, one is generated
  (``secrets.token_urlsafe(32)``) and the command line prints it once.
* Every request (the event stream too) must carry it; tokens are compared in constant time
  (``hmac.compare_digest``); a missing or wrong one is 401 and logged with the peer, method
  and path, never the token.

The **control token** guards every mutating request (any method but GET/HEAD/OPTIONS), on
loopback too (docs/security.md): a fresh ``secrets.token_urlsafe(32)`` per serving
scheduler, sent as ``X-Symphony-Control``, kept in ``<user state dir>/symphony-tui/api/
<pid>.control`` (``0600`` in a ``0700`` folder, outside every workspace, never in a child's
environment, never logged). The API note of that pid names the file, so the operator's own
console finds it (:func:`find_control_token`; ``attach ssh://`` reads it over ssh). A
request carrying the bearer token of a server that has one needs no control token: the
bearer token is withheld from children the same way.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


class TokenError(Exception):
    """The server cannot have the token it needs (one line, for the operator)."""


@dataclass(frozen=True)
class TokenChoice:
    """The token a server uses (``None``: token-free loopback) and whether it was generated
    here (then the caller shows it once)."""

    token: str | None
    generated: bool = False


def is_loopback(host: str) -> bool:
    return host.strip().lower() in LOOPBACK_NAMES or host.startswith("127.")


def resolve_token(
    host: str,
    *,
    token_env: str | None = None,
    require_token: bool = False,
    environ: Mapping[str, str] | None = None,
) -> TokenChoice:
    """Pick the token for a server on ``host`` (the rules in the module docstring).

    Raises :class:`TokenError` when ``token_env`` names a variable that is unset or empty."""
    env = os.environ if environ is None else environ
    if token_env:
        value = env.get(token_env, "").strip()
        if not value:
            raise TokenError(
                f"server.auth_token_env names {token_env}, but it is not set: refusing to "
                "serve the HTTP API without its token"
            )
        return TokenChoice(value)
    if require_token or not is_loopback(host):
        return TokenChoice(secrets.token_urlsafe(32), generated=True)
    return TokenChoice(None)


def token_matches(header: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``token`` as a bearer credential;
    constant-time in the token's content."""
    if not header:
        return False
    scheme, _, credential = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(credential.strip().encode("utf-8"), token.encode("utf-8"))


def log_refusal(peer: str | None, method: str, path: str, header: str | None) -> None:
    """One warning line for a refused request; says whether a credential was sent, not what."""
    why = "no bearer token" if not header else "wrong bearer token"
    log.warning("HTTP API: 401 for %s %s from %s (%s)", method, path, peer or "?", why)


CONTROL_HEADER = "X-Symphony-Control"


def new_control_token() -> str:
    return secrets.token_urlsafe(32)


def control_matches(header: str | None, token: str) -> bool:
    """Whether an ``X-Symphony-Control`` header is ``token`` (constant time)."""
    if not header:
        return False
    return hmac.compare_digest(header.strip().encode("utf-8"), token.encode("utf-8"))


def control_token_file(directory: Path, pid: int | None = None) -> Path:
    """``<directory>/<pid>.control`` (this process's by default)."""
    return directory / f"{os.getpid() if pid is None else pid}.control"


def write_control_token(directory: Path, token: str) -> Path:
    """Write this process's control token, readable by its user only; returns the path.
    ``OSError`` is the caller's."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = control_token_file(directory)
    tmp = path.with_suffix(".control-tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(token + "\n")
    os.replace(tmp, path)
    return path


def read_control_token(path: Path | str) -> str | None:
    """The token in ``path``; None when it cannot be read or is empty."""
    try:
        value = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return value or None


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def find_control_token(port: int, directory: Path | None = None) -> str | None:
    """The control token of the live scheduler on this machine serving on ``port``, read
    through its API note (``directory``: the notes' folder, default
    :func:`symphony_tui.api.announce.default_dir`); None when there is none this user can
    read."""
    if directory is None:
        from symphony_tui.api.announce import default_dir

        directory = default_dir()
    try:
        notes = sorted(directory.glob("*.json"))
    except OSError:
        return None
    for path in notes:
        try:
            note = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(note, dict) or note.get("port") != port or not _alive(note.get("pid")):
            continue
        where = note.get("control_token_file")
        if isinstance(where, str) and where:
            token = read_control_token(where)
            if token:
                return token
    return None
