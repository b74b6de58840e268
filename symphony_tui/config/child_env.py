"""The environment of every child the scheduler starts: one recipe for agents and hooks.

Used by the codex app-server launch, the managed OpenHands and OpenCode servers and the
workspace hooks (spec §9.4, §10.1; spec §13 "never hand out secrets"), so all of them
treat the scheduler's secrets, ``env`` overrides and ``$VAR`` values the same way:

1. **Base**: the scheduler's environment (``os.environ`` with the caller's ``env`` laid
   over it) without every *secret name* (:func:`secret_env_names`): the tracker key's
   variables (``LINEAR_API_KEY`` always, plus the ``$VAR`` named by ``tracker.api_key`` or
   ``tracker.provider.api_key``; for ``tracker.kind: github`` also ``GITHUB_TOKEN`` and the
   ``$VAR`` of ``tracker.token``), the variables named by ``tracker.secret_env_names``,
   ``openhands.session_api_key_env``, ``opencode.password_env`` and
   ``server.auth_token_env``, ``SYMPHONY_API_TOKEN`` (the API token ``attach`` reads), and
   the names the tracker adapter declares (``secret_environment_names``, spec §15.3,
   passed in by the runtime). :data:`CHILD_MARKER` is set to the scheduler's pid, so the
   HTTP API can tell a request from an agent's or hook's process (docs/security.md).
2. **Defaults** of the child kind (an isolated ``HOME``, the OpenCode switches...).
3. **Overrides** (``codex.env``, ``openhands.env``, ``opencode.env``, ``hooks.env``): a
   whole-value ``$NAME`` or ``${NAME}`` is replaced by that variable's value; an unset or
   empty variable removes the name; any other string is taken literally.

Agents never get a secret: a secret name in their overrides is ignored and ``$VAR`` values
are resolved against the scrubbed base, so a secret cannot come back under another name.
Hooks may get one on purpose (``pass_secrets=True``): ``hooks.env: {LINEAR_API_KEY:
$LINEAR_API_KEY}`` resolves against the whole environment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

#: Secret names whatever the workflow says: the reference's tracker key variable and the
#: variable ``symphony-tui attach`` reads the API token from.
ALWAYS_SECRET_NAMES = frozenset({"LINEAR_API_KEY", "SYMPHONY_API_TOKEN"})

#: Set in every local child's environment to the pid of the scheduler that started it; the
#: API's peer check refuses mutating requests from a process carrying another value than
#: the scheduler's own (:mod:`symphony_tui.api.peers`). Not a secret: it only labels.
CHILD_MARKER = "SYMPHONY_TUI_SCHEDULER_PID"

_REFERENCE = re.compile(r"^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))$")


def env_reference(value: Any) -> str | None:
    """The variable a whole-value ``$NAME`` / ``${NAME}`` names; None for anything else."""
    if not isinstance(value, str):
        return None
    match = _REFERENCE.match(value.strip())
    if match is None:
        return None
    return match.group(1) or match.group(2)


def _section(raw: Mapping[str, Any], *path: str) -> Mapping[str, Any]:
    node: Any = raw
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else {}


def secret_env_names(raw: Mapping[str, Any]) -> frozenset[str]:
    """The environment variables holding the scheduler's own credentials, from a workflow's
    front matter ``raw`` (as parsed, before ``$VAR`` resolution): see the module doc."""
    names = set(ALWAYS_SECRET_NAMES)
    tracker = _section(raw, "tracker")
    github = str(tracker.get("kind") or "").strip().lower() == "github"
    if github:
        names.add("GITHUB_TOKEN")
    for holder in (tracker, _section(tracker, "provider")):
        for key in ("api_key", "token") if github else ("api_key",):
            name = env_reference(holder.get(key))
            if name:
                names.add(name)
    extra = tracker.get("secret_env_names")
    if isinstance(extra, str):
        extra = [extra]
    if isinstance(extra, list):
        names.update(str(n).strip() for n in extra if str(n).strip())
    for section, key in (
        ("openhands", "session_api_key_env"),
        ("opencode", "password_env"),
        ("server", "auth_token_env"),
    ):
        value = _section(raw, section).get(key)
        if isinstance(value, str) and value.strip():
            names.add(value.strip())
    return frozenset(names)


def resolve_value(value: Any, env: Mapping[str, str]) -> str | None:
    """One override value: ``$NAME`` / ``${NAME}`` -> ``env[NAME]`` (None when unset or
    empty: remove the name); anything else -> its string form."""
    name = env_reference(value)
    if name is None:
        return str(value)
    return env.get(name) or None


class ChildEnv:
    """The recipe for one scheduler: ``base`` (``os.environ`` under the given ``env``) and
    the ``secrets`` names scrubbed from every child. Immutable; :meth:`build` per child."""

    def __init__(self, env: Mapping[str, str] | None = None, secrets: Iterable[str] = ()) -> None:
        self.base: dict[str, str] = {**os.environ, **(env or {})}
        self.secrets = frozenset(secrets) | ALWAYS_SECRET_NAMES

    def with_secrets(self, names: Iterable[str]) -> ChildEnv:
        """The same base with ``names`` added to the secrets (e.g. a reloaded workflow's)."""
        other = ChildEnv.__new__(ChildEnv)
        other.base = self.base
        other.secrets = self.secrets | frozenset(names)
        return other

    def lookup(self, name: str) -> str | None:
        """A variable of the whole base (secrets included: the scheduler's own reads, e.g. a
        server password named by ``opencode.password_env``); None when unset or empty."""
        return self.base.get(name) or None

    def scrubbed(self) -> dict[str, str]:
        """The base without the secret names, with :data:`CHILD_MARKER` (step 1)."""
        env = {k: v for k, v in self.base.items() if k not in self.secrets}
        env[CHILD_MARKER] = str(os.getpid())
        return env

    def overrides(
        self, overrides: Mapping[str, Any], *, pass_secrets: bool = False
    ) -> dict[str, str | None]:
        """``overrides`` resolved (step 3): name -> value, or None to remove the name."""
        against = self.base if pass_secrets else self.scrubbed()
        return {
            str(name): resolve_value(value, against)
            for name, value in overrides.items()
            if pass_secrets or str(name) not in self.secrets
        }

    def build(
        self,
        overrides: Mapping[str, Any] | None = None,
        *,
        defaults: Mapping[str, str] | None = None,
        pass_secrets: bool = False,
    ) -> dict[str, str]:
        """The child's environment: scrubbed base, then ``defaults``, then the resolved
        ``overrides`` (see the module doc)."""
        env = self.scrubbed()
        env.update(defaults or {})
        return apply_overrides(env, self.overrides(overrides or {}, pass_secrets=pass_secrets))


def apply_overrides(env: dict[str, str], resolved: Mapping[str, str | None]) -> dict[str, str]:
    """Lay resolved overrides over ``env`` in place (None removes the name); returns it."""
    for name, value in resolved.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env
