"""Commands on a worker host through the system ``ssh`` client.

The system client, so ``~/.ssh/config``, ``ProxyJump``, agents and keys work as they do
for the operator; ``$SYMPHONY_SSH_CONFIG`` names another client config file (``ssh -F``,
as the reference reads it). Every call runs ``BatchMode=yes`` (never a password prompt)
with ``ConnectTimeout`` from ``worker.connect_timeout_ms``.

Connection reuse: with ``reuse`` (the default) every call shares one OpenSSH master
connection per host (``ControlMaster=auto``, ``ControlPersist``), so a hook or a launch
after the first pays one channel open instead of a full handshake. The control sockets
live in a private folder (mode 0700) of this process, named by ssh's ``%C`` hash; the
masters are told to exit when this process does. A socket whose master died is replaced
by a new master (:meth:`SshTarget.master_live`).

Quoting: the remote side gets one command line, which the host's login shell (not
trusted to be bash) reads: always ``sh -c <script>`` with the script quoted by
:func:`shlex.quote` and free of newlines (:func:`sh_word` spells a multi-line text with
``printf``), so any POSIX-like login shell passes it to ``sh`` untouched.

Errors: :class:`SshError` with a one-line reason: ssh exit 255 is the *connection*
failing (``unreachable``, ``refused``, ``timeout``, ``auth``, ``unknown_host``), never the
remote command; a local deadline is ``timeout``. ssh's own messages often span lines
(a banner, a warning, then the error): the reason keeps the line that names the failure.

:func:`reached_at` tells when a host last answered any command of this process (so a
holder of a "this host is down" verdict, like the remote manifests, can drop it as soon as
a probe got through).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import os
import shlex
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from symphony_tui.config.settings import Settings
from symphony_tui.config.worker_hosts import HostSpec

#: Exit status ssh uses for its own (connection) errors (ssh(1) "EXIT STATUS").
SSH_ERROR_EXIT = 255
#: Seconds a master connection lingers after its last use.
CONTROL_PERSIST_S = 120
_ENV_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")

_control_lock = threading.RLock()
_control_dir: Path | None = None
_masters: dict[str, list[str]] = {}
#: host entry -> monotonic seconds when a command last reached it (any exit but 255).
_reached: dict[str, float] = {}


def reached_at(host: str) -> float:
    """Monotonic seconds when ``host`` (the entry's name) last answered a command of this
    process (any :class:`SshTarget`); 0.0 when never."""
    return _reached.get(host, 0.0)


def _mark_reached(host: str) -> None:
    _reached[host] = time.monotonic()


class SshError(Exception):
    """The connection to a host failed. ``code``: ``unreachable``, ``refused``,
    ``timeout``, ``auth``, ``unknown_host``, ``no_ssh``; ``host``: the entry's name;
    ``str()`` is one line: ``line`` when given (an attach names its ``ssh://`` target
    its own way), else ``host <name> <reason>``."""

    def __init__(self, code: str, host: str, reason: str, *, line: str | None = None) -> None:
        self.code = code
        self.host = host
        self.reason = reason
        super().__init__(line if line is not None else f"host {host} {reason}")


@dataclass(frozen=True)
class Completed:
    """A remote command that ran: its ``exit_code`` and the raw ``stdout`` / ``stderr``."""

    exit_code: int
    stdout: bytes
    stderr: bytes

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def stderr_line(self, limit: int = 300) -> str:
        """The last non-empty stderr line (for one-line errors)."""
        lines = [x for x in self.stderr.decode("utf-8", "replace").splitlines() if x.strip()]
        return lines[-1][:limit] if lines else ""


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1 (a forward's or a local server's)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def control_dir() -> Path:
    """This process's private folder (0700) for master connection sockets."""
    global _control_dir
    with _control_lock:
        if _control_dir is None or not _control_dir.is_dir():
            # Short base: a socket path is limited to ~104 bytes.
            base = "/tmp" if os.path.isdir("/tmp") else None
            _control_dir = Path(tempfile.mkdtemp(prefix="sym-ssh-", dir=base))
            os.chmod(_control_dir, 0o700)
        return _control_dir


@atexit.register
def close_masters() -> None:
    """Ask every master connection this process started to exit; remove the folder."""
    with _control_lock:
        masters = list(_masters.values())
        _masters.clear()
        folder = _control_dir
    for argv in masters:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(argv, capture_output=True, timeout=5, check=False)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def sh_word(text: str) -> str:
    """A shell word, without newlines, that ``sh`` expands to ``text`` (trailing newlines
    dropped): plain :func:`shlex.quote` when ``text`` has no newline, else
    ``"$(printf %b '<text with \\n>')"``."""
    if "\n" not in text:
        return shlex.quote(text)
    escaped = text.replace("\\", "\\\\").replace("\n", "\\n")
    return f'"$(printf %b {shlex.quote(escaped)})"'


def env_exports(env: Mapping[str, str]) -> str:
    """``export A=...; export B=...; `` for ``env`` (names checked: ``ValueError`` for a
    name that is not a shell variable name)."""
    parts = []
    for name, value in env.items():
        if not name or name[0].isdigit() or not set(name) <= _ENV_SAFE:
            raise ValueError(f"environment name {name!r} is not a shell variable name")
        parts.append(f"export {name}={sh_word(value)}; ")
    return "".join(parts)


def remote_command(script: str) -> str:
    """The one command line ssh sends: ``sh -c <script>`` (``script`` may span lines)."""
    one_line = script if "\n" not in script else f"eval {sh_word(script)}"
    return "sh -c " + shlex.quote(one_line)


#: (code, what ssh writes, the reason's words), first match wins (ssh(1) messages).
_FAILURES = (
    ("unknown_host", ("could not resolve", "name or service not known"), "is unknown"),
    ("auth", ("host key verification failed",), "host key not trusted"),
    ("auth", ("permission denied", "no supported authentication"), "refused the key"),
    ("refused", ("connection refused",), "refused the connection"),
    ("timeout", ("timed out", "timeout"), "did not answer in time"),
)
_REASON_LIMIT = 200


def _classify(host: str, stderr: str) -> SshError:
    """ssh's exit-255 text as one :class:`SshError`: the reason is one line, the line of
    the text that names the failure (ssh often writes a banner, warnings or a proxy's
    errors around it; a stale master socket's line is passed over), without control characters and at most ``_REASON_LIMIT`` long."""
    lines = [
        "".join(c for c in line if c.isprintable()).strip()
        for line in stderr.replace("\r", "\n").splitlines()
    ]
    lines = [line for line in lines if line]
    # A stale master socket is only ssh falling back to a connection of its own.
    lines = [x for x in lines if "control socket" not in x.lower()] or lines
    for code, needles, words in _FAILURES:
        line = next((x for x in lines if any(n in x.lower() for n in needles)), None)
        if line is not None:
            return SshError(code, host, f"{words} ({line[:_REASON_LIMIT]})")
    last = lines[-1][:_REASON_LIMIT] if lines else "ssh exited 255 without a message"
    return SshError("unreachable", host, f"is unreachable ({last})")


def _forward_host(address: str) -> str:
    """An ``-L`` host field: an IPv6 address in brackets."""
    return f"[{address}]" if ":" in address else address


def classify_ssh_failure(host: str, stderr: str) -> SshError:
    """The :class:`SshError` for what ssh printed on ``stderr`` when it exited 255."""
    return _classify(host, stderr)


class SshTarget:
    """How to reach one host: builds ``ssh`` argument lists and runs commands there.

    ``config_file``: passed as ``-F`` (default ``$SYMPHONY_SSH_CONFIG`` when set);
    ``reuse``: share a master connection (see the module doc); ``program``: the ssh
    client (default ``ssh``)."""

    def __init__(
        self,
        spec: HostSpec,
        *,
        connect_timeout_ms: int = 10_000,
        config_file: str | None = None,
        reuse: bool = True,
        program: str = "ssh",
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self.connect_timeout_s = max(1, round(connect_timeout_ms / 1000))
        if config_file is None:
            config_file = os.environ.get("SYMPHONY_SSH_CONFIG") or None
        self.config_file = config_file
        self.reuse = reuse
        self.program = program
        self._master_lock = threading.Lock()

    def _base(self) -> list[str]:
        argv = [self.program]
        if self.config_file:
            argv += ["-F", self.config_file]
        argv += [
            "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={self.connect_timeout_s}",
            "-o", "ServerAliveInterval=5",
            "-o", "ServerAliveCountMax=3",
        ]  # fmt: skip
        if self.spec.port is not None:
            argv += ["-p", str(self.spec.port)]
        return argv

    @property
    def control_path(self) -> Path:
        """This host's master socket (named by a hash of the entry and config file)."""
        digest = hashlib.sha1(f"{self.name}|{self.config_file}".encode()).hexdigest()[:16]
        return control_dir() / digest

    def options(self) -> list[str]:
        """Every option of a command on this target, before the destination. With reuse,
        commands ride the master (``ControlMaster=no``: when it is gone, ssh connects on
        its own)."""
        argv = self._base()
        if self.reuse:
            argv += ["-o", "ControlMaster=no", "-o", f"ControlPath={self.control_path}"]
        return argv

    def master_live(self) -> bool:
        """Whether this host's master socket is there and a master answers on it. A socket
        left by a master that died (killed, out of memory) is removed: ssh would otherwise
        fall back to a full handshake for every command, forever, and print "Control
        socket connect(...): Connection refused" into each command's stderr."""
        path = self.control_path
        if not path.exists():
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(1.0)
            try:
                probe.connect(str(path))
            except (ConnectionRefusedError, FileNotFoundError):
                with contextlib.suppress(OSError):
                    path.unlink()
                return False
            except OSError:
                return True  # busy or slow, not gone: leave it to ssh
        return True

    def _ensure_master_sync(self) -> None:
        """Start the master connection unless its socket is there; raises
        :class:`SshError` when the host cannot be reached. ``-f`` puts it in the
        background after authentication, with no file of ours left open."""
        with self._master_lock:
            if self.master_live():
                return
            argv = [
                *self._base(),
                "-o", "ControlMaster=yes",
                "-o", f"ControlPath={self.control_path}",
                "-o", f"ControlPersist={CONTROL_PERSIST_S}",
                "-N", "-f", "--", self.spec.destination,
            ]  # fmt: skip
            with tempfile.TemporaryFile() as err:
                try:
                    code = subprocess.call(
                        argv,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=err,
                        timeout=self.connect_timeout_s + 10,
                        start_new_session=True,
                    )
                except subprocess.TimeoutExpired:
                    raise SshError(
                        "timeout", self.name, f"did not answer within {self.connect_timeout_s}s"
                    ) from None
                except OSError as exc:
                    raise SshError(
                        "no_ssh", self.name, f"cannot start {self.program}: {exc}"
                    ) from exc
                err.seek(0)
                message = err.read().decode("utf-8", "replace")
            if code != 0:
                raise _classify(self.name, message)
            _mark_reached(self.name)
            with _control_lock:
                _masters[str(self.control_path)] = [
                    *self._base(), "-o", f"ControlPath={self.control_path}",
                    "-O", "exit", "--", self.spec.destination,
                ]  # fmt: skip

    async def ensure_master(self) -> None:
        """:meth:`_ensure_master_sync` off the event loop (a no-op when it is up)."""
        if self.reuse and not self.master_live():
            await asyncio.to_thread(self._ensure_master_sync)

    def argv(self, script: str, *, forward: str | None = None) -> list[str]:
        """``ssh <options> -T [-L forward] -- <destination> sh -c <script>``."""
        argv = [*self.options(), "-T"]
        if forward:
            argv += ["-L", forward]
        return [*argv, "--", self.spec.destination, remote_command(script)]

    def forward_argv(
        self, local_port: int, remote_port: int, remote_address: str = "127.0.0.1"
    ) -> list[str]:
        """``ssh -N -L 127.0.0.1:<local_port>:<remote_address>:<remote_port>`` (the address
        as the host reaches it, loopback by default) to this host, on a
        connection of its own (``ControlPath=none``: the forward lives exactly as long as
        this client, never in the shared master) that exits when the port cannot be bound
        here (``ExitOnForwardFailure``). Both ends are loopback: nothing listens beyond
        this machine, and the server on the host stays bound to the host's loopback."""
        return [
            *self._base(),
            "-o", "ControlMaster=no",
            "-o", "ControlPath=none",
            "-o", "ExitOnForwardFailure=yes",
            "-N", "-L", f"127.0.0.1:{local_port}:{_forward_host(remote_address)}:{remote_port}",
            "--", self.spec.destination,
        ]  # fmt: skip

    def connection_argv(self, control: str) -> list[str]:
        """``ssh -N -M -S <control>``: a connection of its own to this host (not the shared
        master) that carries nothing yet; :meth:`add_forward_argv` then adds a forward to
        it in one local round trip. The connection can be made before the port it will
        forward is known; its client's exit says the connection dropped. ``control``
        must be in a folder of this user alone."""
        return [
            *self._base(),
            "-o", "ControlMaster=yes",
            "-o", f"ControlPath={control}",
            "-o", "ControlPersist=no",
            "-N", "--", self.spec.destination,
        ]  # fmt: skip

    def add_forward_argv(self, control: str, local_port: int, remote_port: int) -> list[str]:
        """``ssh -O forward -L 127.0.0.1:<local_port>:127.0.0.1:<remote_port>`` on the
        connection of :meth:`connection_argv` (both ends loopback); exits non-zero when the
        port here cannot be bound or the connection is gone."""
        return [
            *self._base(),
            "-o", f"ControlPath={control}",
            "-O", "forward", "-L", f"127.0.0.1:{local_port}:127.0.0.1:{remote_port}",
            "--", self.spec.destination,
        ]  # fmt: skip

    def forward_socket_argv(self, local_path: str, remote_path: str) -> list[str]:
        """``ssh -N -L <local_path>:<remote_path>``: a unix socket here that reaches a unix
        socket on the host, on a connection of its own as :meth:`forward_argv` (a stale
        socket file here is replaced: ``StreamLocalBindUnlink``). The local socket's folder
        must be this user's alone: a unix socket has no other credential."""
        return [
            *self._base(),
            "-o", "ControlMaster=no",
            "-o", "ControlPath=none",
            "-o", "ExitOnForwardFailure=yes",
            "-o", "StreamLocalBindUnlink=yes",
            "-N", "-L", f"{local_path}:{remote_path}",
            "--", self.spec.destination,
        ]  # fmt: skip

    async def run(
        self, script: str, *, stdin: bytes | None = None, timeout_s: float | None = None
    ) -> Completed:
        """Run ``script`` with ``sh`` on the host; its exit code is the result's (an
        unreachable host raises :class:`SshError`; so does a ``timeout_s`` deadline, after
        the local client is killed)."""
        await self.ensure_master()
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv(script),
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as err:
            raise SshError("no_ssh", self.name, f"cannot start {self.program}: {err}") from err
        try:
            out, err_out = await asyncio.wait_for(proc.communicate(stdin), timeout_s)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise SshError(
                "timeout", self.name, f"did not finish the command within {timeout_s:g}s"
            ) from None
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            raise
        code = proc.returncode if proc.returncode is not None else SSH_ERROR_EXIT
        if code == SSH_ERROR_EXIT:
            raise _classify(self.name, err_out.decode("utf-8", "replace"))
        _mark_reached(self.name)
        return Completed(code, out, err_out)

    def run_sync(
        self, script: str, *, stdin: bytes | None = None, timeout_s: float = 30.0
    ) -> Completed:
        """:meth:`run` for a worker thread (the manifest writer)."""
        if self.reuse:
            self._ensure_master_sync()
        try:
            done = subprocess.run(
                self.argv(script),
                input=stdin if stdin is not None else b"",
                capture_output=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise SshError(
                "timeout", self.name, f"did not finish the command within {timeout_s:g}s"
            ) from None
        except OSError as err:
            raise SshError("no_ssh", self.name, f"cannot start {self.program}: {err}") from err
        if done.returncode == SSH_ERROR_EXIT:
            raise _classify(self.name, done.stderr.decode("utf-8", "replace"))
        _mark_reached(self.name)
        return Completed(done.returncode, done.stdout, done.stderr)

    async def probe(self, timeout_s: float | None = None) -> float:
        """Round trip of a no-op command in milliseconds; raises :class:`SshError`."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        result = await self.run("exit 0", timeout_s=timeout_s or self.connect_timeout_s + 5)
        if not result.ok:
            raise SshError("unreachable", self.name, f"probe exited {result.exit_code}")
        return (loop.time() - started) * 1000


class HostTargets:
    """The :class:`SshTarget` of each ``worker.ssh_hosts`` entry of ``settings()``, built
    once per host and connection settings (a reloaded workflow's new timeout or a changed
    ``$SYMPHONY_SSH_CONFIG`` gives a new one). ``reuse``: connection reuse (tests and the
    benchmark turn it off). Raises ``KeyError`` for a host that is not listed."""

    def __init__(self, settings: Callable[[], Settings], *, reuse: bool = True) -> None:
        self._settings = settings
        self.reuse = reuse
        self._built: dict[str, tuple[tuple[Any, ...], SshTarget]] = {}

    def __call__(self, name: str) -> SshTarget:
        worker = self._settings().worker
        spec = worker.spec(name)
        key = (spec, worker.connect_timeout_ms, os.environ.get("SYMPHONY_SSH_CONFIG"), self.reuse)
        built = self._built.get(name)
        if built is None or built[0] != key:
            target = SshTarget(spec, connect_timeout_ms=worker.connect_timeout_ms, reuse=self.reuse)
            built = self._built[name] = (key, target)
        return built[1]
