"""``worker.*``: the SSH worker hosts agents run on (the reference's
``worker.ssh_hosts`` and ``worker.max_concurrent_agents_per_host``, so its files load).

A host is written as OpenSSH takes it: ``host``, ``user@host``, ``host:2222`` or
``[::1]:2222`` (a bare IPv6 address needs the brackets only with a port). The text as
written is the host's name everywhere (console, API, manifests, ``worker.hosts`` keys).
Everything else about the connection (keys, ``ProxyJump``, user defaults) comes from the
user's ``~/.ssh/config`` or ``$SYMPHONY_SSH_CONFIG``.

No hosts (the default) means agents and workspaces stay on this machine.
Validation errors are ``ValueError`` inside pydantic (one line, naming the entry).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from symphony_tui.config.numbers import Milliseconds, WholeNumber

#: How a codex run on a worker host is split (``worker.codex_mode``,
#: ``worker.hosts.<h>.codex_mode``): ``app-server``, the agent runs on the host;
#: ``exec-server``, the agent runs here and its commands and file edits run on the host
#: (agents/codex/exec_server.py).
CODEX_MODES = ("app-server", "exec-server")

_NAME = re.compile(r"^[A-Za-z0-9._%+-]+$")
_USER = re.compile(r"^[A-Za-z0-9._-][A-Za-z0-9._@-]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HTTP_URL = re.compile(r"^http://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})/?$")
#: The backends that run on worker hosts (``worker.hosts.<h>.commands`` keys).
BACKENDS_ON_HOSTS = ("codex", "opencode", "openhands", "acp")


@dataclass(frozen=True)
class HostSpec:
    """One ``worker.ssh_hosts`` entry: ``name`` (as written), ``user`` (None: ssh's
    default), ``hostname`` (without brackets) and ``port`` (None: ssh's default)."""

    name: str
    hostname: str
    user: str | None = None
    port: int | None = None

    @property
    def destination(self) -> str:
        """What ``ssh`` takes as its destination argument: ``user@hostname``."""
        return f"{self.user}@{self.hostname}" if self.user else self.hostname


def parse_host(text: Any) -> HostSpec:
    """Parse one host entry; raises ``ValueError`` with a one-line reason."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"worker.ssh_hosts entry {text!r} is not a host name")
    name = text.strip()
    rest = name
    user = None
    if "@" in rest:
        user, _, rest = rest.rpartition("@")
        if not _USER.match(user) or user.startswith("-"):
            raise ValueError(f"worker.ssh_hosts entry {name!r}: bad user {user!r}")
    port: str | None = None
    if rest.startswith("["):
        host, sep, tail = rest[1:].partition("]")
        if not sep or not host:
            raise ValueError(f"worker.ssh_hosts entry {name!r}: unclosed '['")
        if tail:
            if not tail.startswith(":"):
                raise ValueError(f"worker.ssh_hosts entry {name!r}: junk after ']'")
            port = tail[1:]
        if not re.match(r"^[0-9A-Fa-f:.%A-Za-z]+$", host):
            raise ValueError(f"worker.ssh_hosts entry {name!r}: bad address {host!r}")
    elif rest.count(":") == 1:
        host, _, port = rest.partition(":")
        if not _NAME.match(host) or host.startswith("-"):
            raise ValueError(f"worker.ssh_hosts entry {name!r}: bad host name {host!r}")
    elif rest.count(":") > 1:
        host = rest  # a bare IPv6 address, no port
        if not re.match(r"^[0-9A-Fa-f:.]+$", host):
            raise ValueError(f"worker.ssh_hosts entry {name!r}: bad address {host!r}")
    else:
        host = rest
        if not _NAME.match(host) or host.startswith("-"):
            raise ValueError(f"worker.ssh_hosts entry {name!r}: bad host name {host!r}")
    number = None
    if port is not None:
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"worker.ssh_hosts entry {name!r}: bad port {port!r}")
        number = int(port)
    if not host:
        raise ValueError(f"worker.ssh_hosts entry {name!r}: no host name")
    return HostSpec(name=name, hostname=host, user=user, port=number)


def names_codex_program(command: str) -> bool:
    """Whether ``command`` has the word ``app-server`` after a program: what an
    exec-server host runs is that program with ``exec-server``."""
    words = command.split()
    return "app-server" in words and words.index("app-server") > 0


def _codex_mode_of(value: Any) -> str:
    if value not in CODEX_MODES:
        raise ValueError(f"codex_mode {value!r} is not one of {', '.join(CODEX_MODES)}")
    return str(value)


class HostOverrides(BaseModel):
    """``worker.hosts.<entry>``: what one host does differently. ``workspace_root`` (on the
    host; default ``worker.workspace_root``, else ``workspace.root``),
    ``max_concurrent_agents`` (default ``worker.max_concurrent_agents_per_host``), ``env``
    (laid over the agents' and hooks' ``env`` on that host; ``$VAR`` resolved here),
    ``commands`` (backend name -> the command that starts it on that host, e.g.
    ``{opencode: /opt/opencode/bin/opencode serve}``; default ``<backend>.command``),
    ``base_url`` (server backend -> ``http://<address>:<port>`` of a server run on that host
    by other means, as the host reaches it, e.g. ``http://127.0.0.1:4096``: reached through
    an ssh port forward instead of starting one per run); ``min_free_memory_mb`` and
    ``max_memory_mb`` (default ``worker.min_free_memory_mb`` / ``worker.max_memory_mb``):
    the host takes no new run while its free memory is under the floor, or while its
    agents together use the cap or more; ``codex_mode`` (default ``worker.codex_mode``):
    one of :data:`CODEX_MODES`."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    workspace_root: str | None = None
    codex_mode: str | None = None
    max_concurrent_agents: WholeNumber | None = Field(default=None, gt=0)
    min_free_memory_mb: WholeNumber | None = Field(default=None, ge=0)
    max_memory_mb: WholeNumber | None = Field(default=None, ge=0)
    env: dict[str, str] = Field(default_factory=dict)
    commands: dict[str, str] = Field(default_factory=dict)
    base_url: dict[str, str] = Field(default_factory=dict)

    @field_validator("base_url", mode="before")
    @classmethod
    def _base_urls(cls, value: Any) -> Any:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ValueError("must map a server backend (opencode, openhands) to its URL")
        for key, url in value.items():
            if key not in ("opencode", "openhands"):
                raise ValueError(f"base_url.{key}: not a server backend (opencode, openhands)")
            if not isinstance(url, str) or not _HTTP_URL.match(url):
                raise ValueError(f"base_url.{key} must be http://<host>:<port> as seen on the host")
        return value

    @field_validator("commands", mode="before")
    @classmethod
    def _commands(cls, value: Any) -> Any:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ValueError("must map a backend (codex, opencode, openhands, acp) to its command")
        for key, command in value.items():
            if key not in BACKENDS_ON_HOSTS:
                raise ValueError(
                    f"commands.{key}: not a backend (use {', '.join(BACKENDS_ON_HOSTS)})"
                )
            if not isinstance(command, str) or not command.strip():
                raise ValueError(f"commands.{key} must be a non-empty command")
        return value

    @field_validator("codex_mode")
    @classmethod
    def _codex_mode(cls, value: str | None) -> str | None:
        return None if value is None else _codex_mode_of(value)

    @model_validator(mode="after")
    def _exec_server_command(self) -> HostOverrides:
        command = self.commands.get("codex")
        if self.codex_mode == "exec-server" and command and not names_codex_program(command):
            raise ValueError(
                f"commands.codex {command!r}: codex_mode exec-server needs a command with "
                "the word app-server after its program (which runs exec-server on the host)"
            )
        return self

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not _ENV_NAME.match(key):
                raise ValueError(f"env name {key!r} is not a shell variable name")
        return value


class WorkerSettings(BaseModel):
    """``worker.*`` (see the module doc). ``ssh_hosts``: the hosts, in order;
    ``max_concurrent_agents_per_host``: each host's cap (None: only the global
    ``agent.max_concurrent_agents``); ``workspace_root``: the root on every host;
    ``hosts``: per-host :class:`HostOverrides` keyed by the entry as written;
    ``connect_timeout_ms``: ssh's ``ConnectTimeout``; ``down_backoff_ms``: the first wait
    before a down host is probed again (doubling, up to ``down_backoff_max_ms``);
    ``min_free_memory_mb`` (0: none) and ``max_memory_mb`` (0: none): this machine takes no
    new run while its free memory is under the floor, or while its agents together use the
    cap or more (each host's default too); ``resource_sample_ms``: how often each run's
    agent memory and CPU and each machine's free memory are sampled (0: never);
    ``host_lost_after_ms``: how long a detached agent's dropped link keeps trying to reach
    its host before the run fails as host down (agents/codex/link.py; for
    ``codex_mode: exec-server``, its port forward); ``codex_mode``: how codex runs on every
    host (:data:`CODEX_MODES`; ``worker.hosts.<h>.codex_mode`` wins)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    ssh_hosts: tuple[str, ...] = ()
    max_concurrent_agents_per_host: WholeNumber | None = Field(default=None, gt=0)
    workspace_root: str | None = None
    hosts: dict[str, HostOverrides] = Field(default_factory=dict)
    connect_timeout_ms: Milliseconds = Field(default=10_000, gt=0)
    down_backoff_ms: Milliseconds = Field(default=5_000, gt=0)
    down_backoff_max_ms: Milliseconds = Field(default=300_000, gt=0)
    min_free_memory_mb: WholeNumber = Field(default=0, ge=0)
    max_memory_mb: WholeNumber = Field(default=0, ge=0)
    resource_sample_ms: Milliseconds = Field(default=5_000, ge=0)
    host_lost_after_ms: Milliseconds = Field(default=60_000, gt=0)
    codex_mode: str = "app-server"

    @field_validator("codex_mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> Any:
        return "app-server" if value is None else _codex_mode_of(value)

    @field_validator("ssh_hosts", mode="before")
    @classmethod
    def _hosts(cls, value: Any) -> Any:
        if value is None:
            return ()
        if isinstance(value, str):
            value = [v for v in value.split(",") if v.strip()]
        if not isinstance(value, list | tuple):
            raise ValueError("must be a list of hosts (host, user@host, host:2222, [::1]:2222)")
        out: list[str] = []
        for entry in value:
            spec = parse_host(entry)
            if spec.name in out:
                raise ValueError(f"worker.ssh_hosts lists {spec.name!r} twice")
            out.append(spec.name)
        return tuple(out)

    @field_validator("hosts", mode="before")
    @classmethod
    def _overrides(cls, value: Any) -> Any:
        return {} if value is None else value

    @model_validator(mode="after")
    def _known_overrides(self) -> WorkerSettings:
        for key in self.hosts:
            if key not in self.ssh_hosts:
                raise ValueError(f"worker.hosts.{key} names no worker.ssh_hosts entry")
        return self

    @property
    def enabled(self) -> bool:
        """True when agents run on SSH hosts (at least one is listed)."""
        return bool(self.ssh_hosts)

    def specs(self) -> tuple[HostSpec, ...]:
        return tuple(parse_host(name) for name in self.ssh_hosts)

    def spec(self, name: str) -> HostSpec:
        """The spec of host ``name``; ``KeyError`` when it is not listed."""
        if name not in self.ssh_hosts:
            raise KeyError(name)
        return parse_host(name)

    def capacity(self, name: str) -> int | None:
        """How many agents host ``name`` may run at once (None: no per-host cap)."""
        own = self.hosts.get(name)
        if own is not None and own.max_concurrent_agents is not None:
            return own.max_concurrent_agents
        return self.max_concurrent_agents_per_host

    def memory_floor_mb(self, name: str | None) -> int:
        """The free memory in MB below which ``name`` (None: this machine) takes no new run
        (0: no floor)."""
        own = self.hosts.get(name) if name is not None else None
        if own is not None and own.min_free_memory_mb is not None:
            return own.min_free_memory_mb
        return self.min_free_memory_mb

    def memory_cap_mb(self, name: str | None) -> int:
        """The memory in MB that the agents on ``name`` (None: this machine) may use
        together before it takes no new run (0: no cap)."""
        own = self.hosts.get(name) if name is not None else None
        if own is not None and own.max_memory_mb is not None:
            return own.max_memory_mb
        return self.max_memory_mb

    def workspace_root_for(self, name: str, default: str) -> str:
        """The workspace root on host ``name`` (``default``: ``workspace.root``)."""
        own = self.hosts.get(name)
        if own is not None and own.workspace_root:
            return own.workspace_root
        return self.workspace_root or default

    def command_for(self, name: str, backend: str, default: str) -> str:
        """The command starting ``backend`` on host ``name`` (``default``: the backend's
        ``command``)."""
        own = self.hosts.get(name)
        return (own.commands.get(backend) if own is not None else None) or default

    def server_on(self, name: str, backend: str) -> tuple[str, int] | None:
        """``(address, port)`` of the ``backend`` server run on host ``name`` by other
        means (``worker.hosts.<h>.base_url``), as the host reaches it; None: none."""
        own = self.hosts.get(name)
        url = own.base_url.get(backend) if own is not None else None
        match = _HTTP_URL.match(url) if url else None
        if match is None:
            return None
        return match.group(1).strip("[]"), int(match.group(2))

    def codex_mode_for(self, name: str) -> str:
        """How codex runs on host ``name``: ``app-server`` or ``exec-server``."""
        own = self.hosts.get(name)
        if own is not None and own.codex_mode is not None:
            return own.codex_mode
        return self.codex_mode

    def env_for(self, name: str) -> dict[str, str]:
        """The host's ``env`` overrides (empty when none)."""
        own = self.hosts.get(name)
        return dict(own.env) if own is not None else {}
