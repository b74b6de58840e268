"""Each run's posture (:class:`~symphony_tui.domain.posture.RunPosture`), built when it is
dispatched from the settings of that moment (docs/security.md).

:class:`PostureSource` holds what the settings do not say: the secret names the runtime
withholds (tracker-declared ones included), the environment children are built from, and
the control API this scheduler serves (set by the front end that started it, before any
dispatch). The rules are in :func:`run_posture`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from symphony_tui.config.child_env import ALWAYS_SECRET_NAMES
from symphony_tui.config.settings import Settings
from symphony_tui.domain.posture import RunPosture


@dataclass(frozen=True)
class ControlSurface:
    """The HTTP API as served: its URL, whether it listens on loopback only, and whether
    every request needs the bearer token."""

    url: str
    loopback: bool = True
    token_required: bool = False


@dataclass
class PostureSource:
    secrets: frozenset[str] = frozenset()
    env: Mapping[str, str] = field(default_factory=lambda: os.environ)
    control: ControlSurface | None = None

    def of(self, settings: Settings, backend: str, host: str | None) -> RunPosture:
        return run_posture(
            settings, backend, host, secrets=self.secrets, env=self.env, control=self.control
        )


def _codex_sandbox(settings: Settings) -> tuple[str, str, bool]:
    """(kind, policy, network open) of the codex settings."""
    codex = settings.codex
    policy = codex.turn_sandbox_policy
    approval = codex.approval_policy
    approval_text = approval if isinstance(approval, str) else "granular"
    if isinstance(policy, dict) and policy.get("type"):
        kind = str(policy["type"])
        network = bool(policy.get("networkAccess")) or kind in (
            "dangerFullAccess",
            "externalSandbox",
        )
        detail = f"turn_sandbox_policy {kind}, networkAccess {str(network).lower()}"
    else:
        kind = codex.thread_sandbox
        network = kind == "danger-full-access"
        detail = f"thread_sandbox {kind}"
    return f"codex {kind}", f"{detail}; approval_policy {approval_text}", network


def run_posture(
    settings: Settings,
    backend: str,
    host: str | None,
    *,
    secrets: frozenset[str] = frozenset(),
    env: Mapping[str, str] | None = None,
    control: ControlSurface | None = None,
) -> RunPosture:
    """The posture of a run of ``backend`` on ``host`` (None: this machine)."""
    env = os.environ if env is None else env
    names = secrets | ALWAYS_SECRET_NAMES | set(settings.tracker.secret_env_names)
    withheld = tuple(sorted(n for n in names if env.get(n)))
    where = f"on {host}" if host else "on this machine"
    network_open = True
    if backend == "codex":
        sandbox, policy, network_open = _codex_sandbox(settings)
        network = (
            "open (the sandbox allows network)"
            if network_open
            else "blocked by the codex sandbox (where the OS supports it: Landlock and "
            "seccomp on Linux, Seatbelt on macOS)"
        )
        if host and settings.worker.codex_mode_for(host) == "exec-server":
            transport = (
                f"exec-server on {host}: a codex app-server here (stdio), its commands and "
                "edits through a codex exec-server there over an ssh forward (a dropped "
                "forward reconnects; codex.env stays here)"
            )
        elif settings.codex.detached:
            transport = (
                f"unix socket on {host}: a detached codex app-server through an ssh forward "
                "(a dropped link reconnects)"
                if host
                else "unix socket: a detached codex app-server (its turn survives a "
                "scheduler restart)"
            )
        else:
            transport = (
                f"ssh to {host}: codex app-server over the session's stdio"
                if host
                else "stdio: a codex app-server child process (JSON-RPC lines)"
            )
    elif backend == "acp":
        sandbox = "none: the agent's tools run as this user " + where
        policy = f"agent.approvals {settings.agent.approvals}"
        network = "open (no sandbox)"
        transport = (
            f"ssh to {host}: JSON-RPC over the ACP agent's stdio"
            if host
            else "stdio: JSON-RPC lines with an ACP agent child process"
        )
    else:
        section: Any = getattr(settings, backend, None)
        base_url = getattr(section, "base_url", None)
        wire = "REST + WebSocket" if backend == "openhands" else "HTTP + SSE"
        sandbox = "none: tools run as this user " + where
        policy = (
            f"confirmation_policy {settings.openhands.confirmation_policy}"
            if backend == "openhands"
            else f"agent.approvals {settings.agent.approvals}"
        )
        network = "open (no sandbox)"
        if host:
            transport = f"{wire} through an ssh forward to a server on {host}"
        elif base_url:
            transport = f"{wire} to {base_url} (a server not started here)"
        else:
            transport = f"{wire} to a server this scheduler started on 127.0.0.1"
    return RunPosture(
        secrets_withheld=withheld,
        sandbox=sandbox,
        sandbox_policy=policy,
        network=network,
        transport=transport,
        control_api=_control_line(control, host, network_open),
    )


def _control_line(control: ControlSurface | None, host: str | None, network_open: bool) -> str:
    if control is None:
        return "none served: no HTTP API to reach"
    if host:
        if control.loopback:
            return f"not from {host}: the API listens on loopback here ({control.url})"
        return (
            f"reachable from {host} if its network allows ({control.url}); every request "
            "needs the bearer token, which is withheld"
        )
    if not network_open:
        return f"blocked by the sandbox's network rule ({control.url})"
    reads = "need the bearer token (withheld)" if control.token_required else "are open"
    return (
        f"reachable at {control.url}: reads {reads}; writes need the control token and are "
        "refused from this run's processes and workspace"
    )
