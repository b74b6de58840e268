"""Attach over SSH without exposing the API: ``symphony-tui attach ssh://[user@]host[:port]``.

Two runs of the system ``ssh`` (``$SYMPHONY_SSH`` replaces the command, e.g. ``ssh -F
cfg``, as ``GIT_SSH_COMMAND`` does for git):

1. ``ssh host sh -c <script>`` prints the API notes of the live schedulers on that host
   (``<state dir>/symphony-tui/api/<pid>.json``, :mod:`symphony_tui.api.announce`; a note
   whose pid is not alive is skipped), each followed by its control token
   (``<pid>.control``, readable by that user only; docs/security.md) as
   ``{"control_of": <pid>, "control_token": ...}``, and the bearer token a console's
   scheduler generated (``<pid>.token``) as ``{"token_of": <pid>, "token": ...}``;
2. ``ssh -N -L <local unix socket>:127.0.0.1:<api port> host`` forwards a private socket
   in a fresh ``0700`` temporary folder to the scheduler's loopback API. Nothing listens on
   a TCP port of either machine; the HTTP requests name ``127.0.0.1:<port>`` as their Host,
   so the server's Host check holds.

Errors are :class:`~symphony_tui.hosts.ssh.SshError` with one line,
``<ssh://target>: <reason>`` (ssh's own last line of stderr when it failed); ``code`` is
``no_ssh``, ``timeout``, ``unreachable``, ``no_scheduler`` or ``ambiguous``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from symphony_tui.api.announce import parse_notes
from symphony_tui.config.worker_hosts import HostSpec
from symphony_tui.hosts.ssh import SshError

ENV_SSH = "SYMPHONY_SSH"
# Linux (XDG) and macOS locations of platformdirs.user_state_dir("symphony-tui")/api.
DISCOVER_SCRIPT = (
    'for d in "${XDG_STATE_HOME:-$HOME/.local/state}/symphony-tui/api" '
    '"$HOME/Library/Application Support/symphony-tui/api"; do '
    'for f in "$d"/*.json; do [ -f "$f" ] || continue; p=$(basename "$f" .json); '
    'kill -0 "$p" 2>/dev/null && { cat "$f"; echo; '
    '[ -r "$d/$p.control" ] && printf \'{"control_of": %s, "control_token": "%s"}\\n\' '
    '"$p" "$(tr -cd \'A-Za-z0-9_-\' < "$d/$p.control")"; '
    '[ -r "$d/$p.token" ] && printf \'{"token_of": %s, "token": "%s"}\\n\' '
    '"$p" "$(tr -cd \'A-Za-z0-9_-\' < "$d/$p.token")"; }; done; done; true'
)


def parse_target(text: str) -> HostSpec:
    """``ssh://[user@]host[:port]`` or ``[user@]host`` -> a
    :class:`~symphony_tui.config.worker_hosts.HostSpec` named ``ssh://[user@]host[:port]``;
    raises ``ValueError`` with the reason (a user or host starting with ``-`` too)."""
    raw = text.strip()
    if "://" not in raw:
        raw = "ssh://" + raw
    parts = urlsplit(raw)
    if parts.scheme != "ssh":
        raise ValueError(f"{text!r} is not ssh://[user@]host[:port]")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"{text!r}: the port is not a number (1-65535)") from None
    if not parts.hostname or parts.path not in ("", "/") or parts.query:
        raise ValueError(f"{text!r} is not ssh://[user@]host[:port]")
    if parts.hostname.startswith("-") or (parts.username or "").startswith("-"):
        # ssh would read the destination as one of its options
        raise ValueError(f"{text!r}: a user or host name never starts with '-'")
    destination = f"{parts.username}@{parts.hostname}" if parts.username else parts.hostname
    name = f"ssh://{destination}" + (f":{port}" if port else "")
    return HostSpec(name, parts.hostname, parts.username, port)


def _port_options(target: HostSpec) -> list[str]:
    return ["-p", str(target.port)] if target.port else []


def _failed(code: str, target: HostSpec, reason: str) -> SshError:
    return SshError(code, target.name, reason, line=f"{target.name}: {reason}")


def ssh_command() -> list[str]:
    """The ssh program and its fixed options: ``$SYMPHONY_SSH`` (shell words) or ``ssh``."""
    words = shlex.split(os.environ.get(ENV_SSH, "") or "ssh")
    if shutil.which(words[0]) is None:
        reason = f"not found (install OpenSSH, or set {ENV_SSH})"
        raise SshError("no_ssh", words[0], reason, line=f"{words[0]} {reason}")
    return words


def _last_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def discover(target: HostSpec, *, timeout_s: float = 30.0) -> list[dict]:
    """The API notes of the live schedulers on ``target`` (may be empty)."""
    command = [*ssh_command(), *_port_options(target), target.destination]
    command += ["sh", "-c", shlex.quote(DISCOVER_SCRIPT)]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        raise _failed("timeout", target, f"no answer within {timeout_s:.0f}s") from None
    if done.returncode != 0:
        reason = f"ssh failed ({done.returncode}): {_last_line(done.stderr)}"
        raise _failed("unreachable", target, reason)
    notes = parse_notes(done.stdout)
    tokens = control_tokens(done.stdout)
    bearer = control_tokens(done.stdout, of="token_of", value="token")
    for note in notes:
        if note.get("pid") in tokens:
            note["control_token"] = tokens[note["pid"]]
        if note.get("pid") in bearer:
            note["api_token"] = bearer[note["pid"]]
    return notes


def control_tokens(
    text: str, *, of: str = "control_of", value: str = "control_token"
) -> dict[int, str]:
    """``{pid: control token}`` from the discovery's ``control_of`` lines (``of`` /
    ``value``: ``token_of`` / ``token`` for the bearer tokens a console's scheduler keeps
    in ``<pid>.token``)."""
    found: dict[int, str] = {}
    for line in text.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if (
            isinstance(item, dict)
            and isinstance(item.get(of), int)
            and isinstance(item.get(value), str)
            and item[value]
        ):
            found[item[of]] = item[value]
    return found


def choose(notes: list[dict], target: HostSpec, api_port: int | None = None) -> int:
    """The API port to forward to: ``api_port`` when given, else the one live scheduler's."""
    if api_port is not None:
        return api_port
    if not notes:
        raise _failed(
            "no_scheduler",
            target,
            "no scheduler with an HTTP API runs there for that user "
            "(start it with --port; or name the port with --api-port)",
        )
    if len(notes) > 1:
        listed = ", ".join(f"pid {n.get('pid')} on port {n['port']}" for n in notes)
        reason = f"several schedulers run there ({listed}); pick with --api-port"
        raise _failed("ambiguous", target, reason)
    return int(notes[0]["port"])


class SshTunnel:
    """A running ``ssh -N -L`` from a private unix socket to ``127.0.0.1:<api_port>`` on the
    remote host. :meth:`client` makes HTTP clients through it; :meth:`close` ends ssh."""

    def __init__(self, target: HostSpec, api_port: int) -> None:
        self.target = target
        self.api_port = api_port
        self._dir = Path(tempfile.mkdtemp(prefix="symphony-ssh-"))  # mode 0700
        self.socket_path = self._dir / "api.sock"
        self._proc: subprocess.Popen[str] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def open(self, *, timeout_s: float = 30.0) -> SshTunnel:
        """Start ssh and wait until the socket exists; raises :class:`SshError`."""
        command = [
            *ssh_command(),
            *_port_options(self.target),
            "-N",
            "-T",
            "-o",
            "ExitOnForwardFailure=yes",
            "-o",
            "ServerAliveInterval=5",
            "-o",
            "ServerAliveCountMax=3",
            "-L",
            f"{self.socket_path}:127.0.0.1:{self.api_port}",
            self.target.destination,
        ]
        self._proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # the console's Ctrl+C is not ssh's
        )
        deadline = time.monotonic() + timeout_s
        while not self.socket_path.exists():
            if self._proc.poll() is not None:
                stderr = self._proc.stderr.read() if self._proc.stderr else ""
                self.close()
                raise _failed(
                    "unreachable", self.target, f"the forward failed: {_last_line(stderr)}"
                )
            if time.monotonic() > deadline:
                self.close()
                reason = f"the forward was not up within {timeout_s:.0f}s"
                raise _failed("timeout", self.target, reason)
            time.sleep(0.05)
        return self

    @property
    def alive(self) -> bool:
        """Whether its ssh still runs (False before :meth:`open` and after it ended)."""
        return self._proc is not None and self._proc.poll() is None

    def client(self, *, timeout_s: float = 10.0) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.base_url,
            transport=httpx.AsyncHTTPTransport(uds=str(self.socket_path)),
            timeout=timeout_s,
        )

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc is not None and proc.stderr is not None:
            proc.stderr.close()
        with contextlib.suppress(OSError):
            shutil.rmtree(self._dir)

    def __enter__(self) -> SshTunnel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
