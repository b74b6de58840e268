"""Typed settings from WORKFLOW.md front matter, with the spec's defaults (spec §5.3, §6).

Unknown keys are ignored so that workflow files written for the reference implementation
load unchanged (config/unread.py reports them). The reference's current schema (its
``config/schema.ex``) is read too: ``tracker.provider`` and ``tracker.required_labels``. ``$VAR`` indirection and ``~`` expansion happen in :func:`resolve_settings`.
Validation errors are raised as :class:`pydantic.ValidationError`; the loader turns them
into one-line :class:`~symphony_tui.config.errors.WorkflowError` messages.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from symphony_tui.config import rest_trackers
from symphony_tui.config.child_env import secret_env_names
from symphony_tui.config.github import GitHubSettings
from symphony_tui.config.numbers import Milliseconds, WholeNumber, refuse_boolean
from symphony_tui.config.pricing import ModelPrice, model_keys
from symphony_tui.config.variants import read_variants
from symphony_tui.config.worker_hosts import WorkerSettings

LINEAR_ENDPOINT = "https://api.linear.app/graphql"
GITHUB_API_URL = "https://api.github.com"
DEFAULT_ACTIVE_STATES = ("Todo", "In Progress")
DEFAULT_TERMINAL_STATES = ("Closed", "Cancelled", "Canceled", "Duplicate", "Done")
DEFAULT_HOOK_TIMEOUT_MS = 60_000
DEFAULT_HOOK_SHUTDOWN_GRACE_MS = 10_000
#: A stop waits at most this long for a hook (one hour): longer is no grace.
MAX_HOOK_SHUTDOWN_GRACE_MS = 3_600_000
#: ``tracker.provider`` keys read (the reference's schema); each wins over ``tracker.<key>``.
PROVIDER_KEYS: tuple[str, ...] = (
    "endpoint",
    "api_key",
    "project_slug",
    "assignee",
    "repo",
    "token",
    "api_url",
)
PROVIDER_KEYS += rest_trackers.PROVIDER_KEYS
#: States of ``tracker.kind: github`` without a board or state labels (the reference's).
GITHUB_ACTIVE_STATES = ("open",)
GITHUB_TERMINAL_STATES = ("closed",)


class _Section(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


def _states(value: Any) -> Any:
    # Accept a comma-separated string as well as a list (spec §5.3.1).
    if isinstance(value, str):
        return tuple(s.strip() for s in value.split(",") if s.strip())
    return value


class GitHubProjectSettings(_Section):
    """``tracker.project`` of ``tracker.kind: github``: a Projects (v2) board whose
    single-select ``status_field`` is the issue state (trackers/github/board.py). ``owner``
    is the organization or user login (default: the repository's owner); ``priority_field``
    a single-select (first option = 1, most urgent) or number field."""

    owner: str | None = None
    number: WholeNumber = Field(gt=0)
    status_field: str = "Status"
    priority_field: str | None = None


class TrackerSettings(_Section):
    kind: str | None = None
    endpoint: str = LINEAR_ENDPOINT
    api_key: str | None = None
    project_slug: str | None = None
    assignee: str | None = None
    path: str | None = None
    active_states: tuple[str, ...] = DEFAULT_ACTIVE_STATES
    terminal_states: tuple[str, ...] = DEFAULT_TERMINAL_STATES
    timeout_ms: Milliseconds = Field(default=30_000, gt=0)
    # The reference's current schema: tracker settings nested under ``provider`` (they win
    # over the flat keys, see resolve_settings) and labels an issue must all carry to be
    # dispatched (trimmed, lowercased, deduplicated).
    provider: dict[str, Any] = Field(default_factory=dict)
    required_labels: tuple[str, ...] = ()
    # tracker.kind github (trackers/github): ``repo`` is owner/name, ``token`` a $VAR (default
    # $GITHUB_TOKEN; resolved into ``api_key``), ``api_url`` https://HOST/api/v3 on GitHub
    # Enterprise Server; ``state_labels`` are labels that name an open issue's state;
    # ``priority_labels`` map a label to a priority (1 most urgent).
    repo: str | None = None
    token: str | None = None
    api_url: str = GITHUB_API_URL
    project: GitHubProjectSettings | None = None
    state_labels: tuple[str, ...] = ()
    priority_labels: dict[str, WholeNumber] = Field(default_factory=dict)
    # tracker.kind jira, gitlab and asana (config/rest_trackers.py): their own keys.
    base_url: str | None = None
    email: str | None = None
    api_token: str | None = None
    project_key: str | None = None
    project_path: str | None = None
    project_gid: str | None = None
    # Environment variables holding the scheduler's credentials, scrubbed from every child
    # (agents and hooks, see config/child_env.py): the names written here plus the ones
    # :func:`resolve_settings` derives (``LINEAR_API_KEY``, the ``$VAR`` of ``api_key``...).
    secret_env_names: tuple[str, ...] = ()
    # The environment variable ``api_key`` was to be read from (``$VAR`` written in the
    # file, or the tracker's default such as ``LINEAR_API_KEY``), so a missing key's error
    # can name it; ``None`` when the key was written literally.
    api_key_env: str | None = None

    _split = field_validator("active_states", "terminal_states", "state_labels", mode="before")(
        _states
    )

    @field_validator("priority_labels", mode="before")
    @classmethod
    def _priority_labels(cls, value: Any) -> Any:
        if value is None:
            return {}
        if isinstance(value, dict):
            return {str(k).strip().lower(): v for k, v in value.items() if str(k).strip()}
        return value

    @field_validator("secret_env_names", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    @field_validator("provider", mode="before")
    @classmethod
    def _provider(cls, value: Any) -> Any:
        return {} if value is None else value

    @field_validator("required_labels", mode="before")
    @classmethod
    def _labels(cls, value: Any) -> Any:
        value = _states(value)
        if value is None:
            return ()
        if not isinstance(value, list | tuple):
            return value  # let validation report it
        out: list[str] = []
        for label in value:
            name = str(label).strip().lower()
            if name and name not in out:
                out.append(name)
        return tuple(out)

    def has_required_labels(self, labels: Iterable[str]) -> bool:
        """Whether ``labels`` include every ``required_labels`` entry (case-insensitive):
        the reference's routing rule; True when none are required."""
        if not self.required_labels:
            return True
        have = {label.strip().lower() for label in labels}
        return all(label in have for label in self.required_labels)

    def is_active(self, state: str) -> bool:
        """``state`` is an active state, both sides trimmed and lowercased (§4.2)."""
        s = state.strip().lower()
        return any(s == a.strip().lower() for a in self.active_states)

    def is_terminal(self, state: str) -> bool:
        """``state`` is a terminal state, both sides trimmed and lowercased (§4.2)."""
        s = state.strip().lower()
        return any(s == t.strip().lower() for t in self.terminal_states)


class PollingSettings(_Section):
    interval_ms: Milliseconds = Field(default=30_000, gt=0)


def default_workspace_root() -> str:
    return str(Path(tempfile.gettempdir()) / "symphony_workspaces")


class WorkspaceSettings(_Section):
    root: str = Field(default_factory=default_workspace_root)
    # The start-up cleanup (spec §8.6) keeps the workspace of an issue in a terminal state
    # while its last manifest write is younger than this (milliseconds; 0: removed at once,
    # as the specification has it).
    keep_terminal_ms: Milliseconds = Field(default=0, ge=0)


class HooksSettings(_Section):
    after_create: str | None = None
    before_run: str | None = None
    after_run: str | None = None
    before_remove: str | None = None
    timeout_ms: Milliseconds = Field(default=DEFAULT_HOOK_TIMEOUT_MS, gt=0)
    # Once the scheduler stops (a quit, a hang-up, SIGTERM), each hook has this long from its
    # own start (one already running: from the stop) before its process group is ended and
    # its result is ``cut_short`` (workspaces/hooks.py ``HookCutoff``); milliseconds,
    # 1..MAX_HOOK_SHUTDOWN_GRACE_MS.
    shutdown_grace_ms: Milliseconds = Field(
        default=DEFAULT_HOOK_SHUTDOWN_GRACE_MS, gt=0, le=MAX_HOOK_SHUTDOWN_GRACE_MS
    )
    # Laid over the hooks' environment (``$VAR`` resolved against the whole environment):
    # the explicit way to hand a hook one of the scrubbed secrets (config/child_env.py).
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("timeout_ms", mode="before")
    @classmethod
    def _non_positive_is_default(cls, value: Any) -> Any:
        # Spec §5.3.4: a non-positive hook timeout is invalid and falls back to the default
        # (it is not a load error, so a reference-implementation workflow still loads).
        if value is None:
            return DEFAULT_HOOK_TIMEOUT_MS
        try:
            number = int(value)
        except (TypeError, ValueError):
            return value  # not a number: let validation report it
        if isinstance(value, bool) or (isinstance(value, float) and value != number):
            return value
        return DEFAULT_HOOK_TIMEOUT_MS if number <= 0 else value


class AgentSettings(_Section):
    backend: Literal["codex", "openhands", "opencode", "acp"] = "codex"
    max_concurrent_agents: WholeNumber = Field(default=10, gt=0)
    max_turns: WholeNumber = Field(default=20, gt=0)
    max_retry_backoff_ms: Milliseconds = Field(default=300_000, gt=0)
    max_concurrent_agents_by_state: dict[str, int] = Field(default_factory=dict)
    approvals: Literal["operator", "auto", "deny"] = "operator"
    approval_timeout_ms: Milliseconds = Field(default=1_800_000, gt=0)
    continuation_prompt: str | None = None
    # Backend-neutral deadlines (None: take ``codex.*``, see Settings.turn_timeout_ms).
    turn_timeout_ms: Milliseconds | None = Field(default=None, gt=0)
    stall_timeout_ms: Milliseconds | None = None
    # Token budgets (total tokens; None: no limit). Crossing one interrupts the turn and
    # holds the run until the operator extends it or stops it (scheduler/usage/budgets.py).
    max_tokens_per_issue: WholeNumber | None = Field(default=None, gt=0)
    max_tokens_per_attempt: WholeNumber | None = Field(default=None, gt=0)
    # Budgets in money (US dollars, priced by ``pricing``; None: no limit), held the same way.
    max_spend_per_issue_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    max_spend_per_attempt_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False)

    @field_validator("max_spend_per_issue_usd", "max_spend_per_attempt_usd", mode="before")
    @classmethod
    def _dollars(cls, value: Any) -> Any:
        return refuse_boolean(value)

    @field_validator("max_concurrent_agents_by_state", mode="before")
    @classmethod
    def _normalize_state_limits(cls, value: Any) -> Any:
        # Spec §5.3.5: keys are normalized (trim + lowercase); invalid entries are ignored.
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ValueError("must be a map of state name to positive integer")
        out: dict[str, int] = {}
        for k, v in value.items():
            name = str(k).strip().lower()
            if name and isinstance(v, int) and not isinstance(v, bool) and v > 0:
                out[name] = v
        return out

    def limit_for_state(self, state: str) -> int | None:
        return self.max_concurrent_agents_by_state.get(state.strip().lower())


#: codex's own app-server, which takes ``--listen unix://PATH``.
DEFAULT_CODEX_COMMAND = "codex app-server"


class CodexSettings(_Section):
    command: str = DEFAULT_CODEX_COMMAND
    # ``stdio``: the app-server is the scheduler's child on pipes (it ends with the
    # scheduler). ``unix``: it runs detached, listening on a unix socket, so a turn goes on
    # through a scheduler restart and is re-adopted (agents/codex/detached.py); on a worker
    # host it runs detached there, reached through an ssh forward, and a dropped link
    # reconnects (agents/codex/remote_detached.py, agents/codex/link.py). ``auto``:
    # ``unix`` for codex's own ``codex app-server``, ``stdio`` for any other command (a
    # wrapper may read stdin and not take ``--listen``). See :attr:`detached`.
    transport: Literal["auto", "stdio", "unix"] = "auto"
    # How long re-attaching to (or first connecting to) a detached app-server may take
    # before it is ended and the run retried.
    reattach_timeout_ms: Milliseconds = Field(default=30_000, gt=0)
    approval_policy: str | dict[str, Any] = "on-request"
    thread_sandbox: str = "workspace-write"
    turn_sandbox_policy: dict[str, Any] | None = None
    model: str | None = None
    # Sent as turn/start ``collaborationMode`` (EXPERIMENTAL in 0.171): ``plan`` gives the
    # model the ``request_user_input`` tool (item/tool/requestUserInput); None omits it.
    collaboration_mode: Literal["plan", "default"] | None = None
    turn_timeout_ms: Milliseconds = Field(default=3_600_000, gt=0)
    read_timeout_ms: Milliseconds = Field(default=5_000, gt=0)
    stall_timeout_ms: Milliseconds = 300_000
    env: dict[str, str] = Field(default_factory=dict)

    @property
    def detached(self) -> bool:
        """Whether each run's app-server runs detached on a unix socket (``transport``
        ``unix``, or ``auto`` with codex's own app-server: a plain ``codex ... app-server``
        command line, any path to ``codex``, no shell pipes or redirections)."""
        if self.transport == "auto":
            return _plain_codex_app_server(self.command)
        return self.transport == "unix"


def _plain_codex_app_server(command: str) -> bool:
    """``codex app-server`` with any path to ``codex`` and options between them, and nothing
    a shell would read as a pipe, list, redirection or expansion (``--listen`` is appended
    to the command, so it must end at ``app-server``)."""
    if any(ch in command for ch in "|;&<>$`()\n"):
        return False
    words = command.split()
    return len(words) >= 2 and words[-1] == "app-server" and Path(words[0]).name == "codex"


class OpenHandsSettings(_Section):
    base_url: str | None = None
    command: str | None = None
    session_api_key_env: str | None = None
    ws_auth: Literal["first_frame", "query", "header", "none"] = "first_frame"
    confirmation_policy: Literal["AlwaysConfirm", "NeverConfirm", "ConfirmRisky"] = "AlwaysConfirm"
    llm: dict[str, Any] = Field(default_factory=dict)
    startup_timeout_ms: Milliseconds = Field(default=60_000, gt=0)
    read_timeout_ms: Milliseconds = Field(default=30_000, gt=0)
    # Extra environment of a managed server (``$VAR`` values resolved by the backend).
    env: dict[str, str] = Field(default_factory=dict)


class OpenCodeSettings(_Section):
    base_url: str | None = None
    command: str | None = None
    model: str | None = None
    password_env: str | None = None
    startup_timeout_ms: Milliseconds = Field(default=60_000, gt=0)
    # Extra environment of a managed server, laid over its isolated one (``$VAR`` values
    # resolved by the backend; the scheduler's own secrets are still removed).
    env: dict[str, str] = Field(default_factory=dict)


class AcpSettings(_Section):
    """``agent.backend: acp``: any agent that speaks the Agent Client Protocol on stdio
    (agents/acp/, docs/configuration.md "acp"). ``command`` runs ``bash -lc`` in the
    workspace like ``codex.command``; ``auth_method`` is the ``authenticate`` method id sent
    after ``initialize`` (None: none unless the agent asks, which then fails the launch with
    the methods it offers); ``mcp_servers`` go to ``session/new`` / ``session/load`` as
    written (ACP ``McpServer`` objects); ``read_timeout_ms`` bounds each request other than
    ``session/prompt`` (an agent started through npx may take seconds to answer
    ``initialize``)."""

    command: str = ""
    auth_method: str | None = None
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    read_timeout_ms: Milliseconds = Field(default=60_000, gt=0)
    env: dict[str, str] = Field(default_factory=dict)


class ServerSettings(_Section):
    """The HTTP API (docs/http-api.md). ``auth_token_env``: the environment variable holding
    the bearer token; ``require_token``: ask for it on loopback too (a non-loopback ``host``
    always needs one); ``allowed_hosts``: further names clients may use in ``Host`` /
    ``Origin`` (the DNS-rebinding check), e.g. the machine's DNS name behind a proxy;
    ``max_streams`` / ``max_streams_per_client``: event streams open at once, in all and
    from one client address (docs/security.md)."""

    port: WholeNumber | None = Field(default=None, ge=0, le=65535)
    host: str = "127.0.0.1"
    auth_token_env: str | None = None
    require_token: bool = False
    allowed_hosts: list[str] = Field(default_factory=list)
    max_streams: WholeNumber = Field(default=256, gt=0)
    max_streams_per_client: WholeNumber = Field(default=64, gt=0)


AlertKind = Literal["approval", "question", "failed", "tracker", "budget", "host"]
ALERT_KINDS: tuple[AlertKind, ...] = ("approval", "question", "failed", "tracker", "budget", "host")


class NotifySettings(_Section):
    """Getting the operator's attention (scheduler/attention.py). Kinds: ``approval`` (an
    approval arrived), ``question`` (an agent's question), ``failed`` (a run failed
    ``failures`` attempts in a row), ``tracker`` (the tracker became unreachable),
    ``budget`` (a run is held by its token budget), ``host`` (a worker host went down).

    ``bell``: kinds that ring the terminal bell; ``desktop``: kinds that also send a desktop
    notification through the terminal, with ``terminal``: ``auto`` (OSC 9 or OSC 777 where
    the terminal is known to show them, nothing elsewhere), ``osc9``, ``osc777``, ``off``.
    ``command``: a shell command run (``bash -lc``, in the workflow's folder, at most
    ``command_timeout_ms``) for the kinds in ``command_on``, with ``SYMPHONY_ALERT_*`` in its
    environment."""

    bell: list[AlertKind] = Field(default_factory=lambda: list(ALERT_KINDS))
    desktop: list[AlertKind] = Field(default_factory=lambda: list(ALERT_KINDS))
    terminal: Literal["auto", "osc9", "osc777", "off"] = "auto"
    command: str | None = None
    command_on: list[AlertKind] = Field(default_factory=lambda: list(ALERT_KINDS))
    command_timeout_ms: Milliseconds = Field(default=30_000, gt=0)
    failures: WholeNumber = Field(default=3, gt=0)


class Settings(_Section):
    """All settings of one WORKFLOW.md, resolved. ``workflow_dir`` anchors relative paths."""

    tracker: TrackerSettings = Field(default_factory=TrackerSettings)
    polling: PollingSettings = Field(default_factory=PollingSettings)
    workspace: WorkspaceSettings = Field(default_factory=WorkspaceSettings)
    hooks: HooksSettings = Field(default_factory=HooksSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    codex: CodexSettings = Field(default_factory=CodexSettings)
    openhands: OpenHandsSettings = Field(default_factory=OpenHandsSettings)
    opencode: OpenCodeSettings = Field(default_factory=OpenCodeSettings)
    acp: AcpSettings = Field(default_factory=AcpSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    notify: NotifySettings = Field(default_factory=NotifySettings)
    #: Model name (lowercased) -> prices, laid over the shipped table (config/pricing.py).
    pricing: dict[str, ModelPrice] = Field(default_factory=dict)
    github: GitHubSettings = Field(default_factory=GitHubSettings)
    workflow_dir: str = "."

    _pricing_keys = field_validator("pricing", mode="before")(model_keys)

    @field_validator(
        "tracker",
        "polling",
        "workspace",
        "hooks",
        "agent",
        "codex",
        "openhands",
        "opencode",
        "acp",
        "server",
        "worker",
        "notify",
        "github",
        mode="before",
    )
    @classmethod
    def _none_is_default(cls, value: Any) -> Any:
        # `codex:` with nothing under it parses as None in YAML: treat it as empty.
        return {} if value is None else value

    def configured_model(self, backend: str) -> str | None:
        """The model the settings choose for ``backend`` (``codex.model``,
        ``opencode.model``, ``openhands.llm.model``), or None (the backend's default, which
        its session may report)."""
        if backend == "codex":
            return self.codex.model
        if backend == "opencode":
            return self.opencode.model
        if backend == "openhands":
            model = self.openhands.llm.get("model")
            return model if isinstance(model, str) and model else None
        return None

    @property
    def workspace_root(self) -> Path:
        return Path(self.workspace.root)

    @property
    def turn_timeout_ms(self) -> int:
        """Milliseconds one turn may take, for every backend (spec §10.6): ``agent.
        turn_timeout_ms`` when set, else ``codex.turn_timeout_ms`` (the reference's key, so
        its files load unchanged; default 3,600,000)."""
        agent = self.agent.turn_timeout_ms
        return self.codex.turn_timeout_ms if agent is None else agent

    @property
    def stall_timeout_ms(self) -> int:
        """Milliseconds without an agent event before a run is stalled, for every backend
        (spec §8.5; zero or less disables it): ``agent.stall_timeout_ms`` when set, else
        ``codex.stall_timeout_ms`` (default 300,000)."""
        agent = self.agent.stall_timeout_ms
        return self.codex.stall_timeout_ms if agent is None else agent


#: The top-level settings sections and their models (what config/variants.py walks).
SECTIONS: dict[str, type[BaseModel]] = {
    name: field.annotation
    for name, field in Settings.model_fields.items()
    if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
}


def resolve_env(value: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """``$NAME`` -> the environment value; an empty or unset variable means missing (None).

    Spec §5.3.1 / §6.1: only a whole-value ``$VAR`` is indirection; other strings are kept.
    """
    if value is None:
        return None
    env = os.environ if env is None else env
    if value.startswith("$") and value[1:].replace("_", "a").isalnum() and value[1:2] != "":
        got = env.get(value[1:], "")
        return got or None
    return value or None


def resolve_path(value: str, base: Path, env: Mapping[str, str] | None = None) -> str:
    """Resolve ``$VAR`` and ``~`` in a path setting; relative paths are relative to ``base``."""
    env = os.environ if env is None else env
    if value.startswith("$"):
        value = resolve_env(value, env) or ""
    if not value:
        return default_workspace_root()
    p = Path(os.path.expanduser(value))
    if not p.is_absolute():
        p = base / p
    return str(p.resolve(strict=False))


def resolve_settings(
    raw: dict[str, Any],
    workflow_dir: Path,
    env: dict[str, str] | None = None,
    notes: list[str] | None = None,
) -> Settings:
    """Build :class:`Settings` from front matter, resolving secrets and paths.

    Port variants with one clear meaning are read first (config/variants.py); their warning
    lines are appended to ``notes`` when it is given.

    ``tracker.provider.<key>`` (:data:`PROVIDER_KEYS`) wins over ``tracker.<key>``;
    ``tracker.api_key`` falls back to ``$LINEAR_API_KEY`` and ``tracker.assignee`` to
    ``$LINEAR_ASSIGNEE`` for the linear tracker. For ``tracker.kind: github`` the token is
    ``tracker.token`` (or ``api_key``), else ``$GITHUB_TOKEN``, resolved into ``api_key``;
    ``repo`` falls back to ``$GITHUB_REPO``; without a board or state labels the states
    default to ``open`` / ``closed``.
    Raises :class:`pydantic.ValidationError` on bad types or values, ``ValueError`` (one
    line) on a variant without one clear meaning.
    """
    env = dict(os.environ) if env is None else env
    raw, read = read_variants(raw, SECTIONS)
    if notes is not None:
        notes.extend(read)
    s = Settings.model_validate({**raw, "workflow_dir": str(workflow_dir)})
    tracker = s.tracker
    secrets = sorted(secret_env_names(raw) | set(tracker.secret_env_names))
    # The reference's current schema nests these under tracker.provider; a nested value
    # wins over the flat one (which is how older files write it).
    nested = {k: tracker.provider[k] for k in PROVIDER_KEYS if tracker.provider.get(k) is not None}
    if nested:
        tracker = TrackerSettings.model_validate({**tracker.model_dump(), **nested})
    linear = (tracker.kind or "linear") == "linear"
    api_key = _secret(resolve_env(tracker.api_key, env))
    api_key_env = _env_name(tracker.api_key)
    if api_key is None and tracker.api_key is None and linear:
        api_key = _secret(env.get("LINEAR_API_KEY"))
        api_key_env = "LINEAR_API_KEY"
    assignee = resolve_env(tracker.assignee, env)
    if assignee is None and tracker.assignee is None and linear:
        assignee = env.get("LINEAR_ASSIGNEE") or None
    github: dict[str, Any] = {}
    if tracker.kind == "github":
        github = _github_defaults(tracker, raw.get("tracker"), env)
        api_key = github.pop("api_key")
        api_key_env = github.pop("api_key_env")
    elif tracker.kind in rest_trackers.KINDS:
        github = rest_trackers.resolved(tracker.kind, tracker, raw.get("tracker"), env)
        api_key = github.pop("api_key")
        api_key_env = github.pop("api_key_env")
    tracker = tracker.model_copy(
        update={
            **github,
            "api_key": api_key,
            "api_key_env": api_key_env,
            "project_slug": resolve_env(tracker.project_slug, env),
            "assignee": assignee,
            "path": resolve_path(tracker.path, workflow_dir, env) if tracker.path else None,
            "secret_env_names": tuple(secrets),
        }
    )
    workspace = s.workspace.model_copy(
        update={"root": resolve_path(s.workspace.root, workflow_dir, env)}
    )
    return s.model_copy(update={"tracker": tracker, "workspace": workspace})


def _env_name(value: str | None) -> str | None:
    """``NAME`` of a whole-value ``$NAME`` reference (see :func:`resolve_env`), else None."""
    if value and value.startswith("$") and value[1:2] and value[1:].replace("_", "a").isalnum():
        return value[1:]
    return None


def _secret(value: str | None) -> str | None:
    """A token as sent: surrounding whitespace (the newline of a token read from a file,
    ``GITHUB_TOKEN=$(cat token)`` keeps none, ``$(<file)`` in some shells does) is not part
    of it, and would make an illegal header that quotes the token in its error."""
    value = value.strip() if value else value
    return value or None


def _github_defaults(tracker: TrackerSettings, raw: Any, env: dict[str, str]) -> dict[str, Any]:
    """Resolved token (as ``api_key``), repo and default states of a github tracker."""
    given = raw if isinstance(raw, dict) else {}
    token_ref = tracker.token if tracker.token is not None else tracker.api_key
    token = _secret(resolve_env(token_ref, env))
    token_env = _env_name(token_ref)
    if token is None and token_ref is None:
        token = _secret(env.get("GITHUB_TOKEN"))
        token_env = "GITHUB_TOKEN"
    repo = resolve_env(tracker.repo, env) if tracker.repo else env.get("GITHUB_REPO") or None
    out: dict[str, Any] = {
        "api_key": token,
        "api_key_env": token_env,
        "repo": repo.strip() if repo else None,
    }
    if tracker.project is None and not tracker.state_labels:
        if "active_states" not in given:
            out["active_states"] = GITHUB_ACTIVE_STATES
        if "terminal_states" not in given:
            out["terminal_states"] = GITHUB_TERMINAL_STATES
    return out
