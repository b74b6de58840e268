"""Settings of ``tracker.kind: jira | gitlab | asana``: defaults, ``$VAR`` resolution and
dispatch validation (docs/configuration.md, "Jira, GitLab and Asana").

Keys are read flat under ``tracker`` or under ``tracker.provider`` (which wins), as the
reference's adapters document them:

* jira: ``base_url`` (``https://SITE.atlassian.net``; default ``$JIRA_BASE_URL``), ``email``
  (default ``$JIRA_EMAIL``), ``api_token`` (default ``$JIRA_API_TOKEN``), ``project_key``.
* gitlab: ``api_url`` (default ``https://gitlab.com/api/v4``), ``api_key`` (default
  ``$GITLAB_PAT``, then ``$GITLAB_ACCESS_TOKEN``), ``project_path`` (``group/project``;
  default ``$GITLAB_PROJECT_PATH``); without ``state_labels`` the states are ``opened`` and
  ``closed``.
* asana: ``endpoint`` (default ``https://app.asana.com/api/1.0``), ``api_key`` (default
  ``$ASANA_PAT``), ``project_gid``.

A value written ``$VAR`` names an environment variable; when that is unset or empty the
default variable is read instead. The resolved credential is kept in ``tracker.api_key``
(so it is redacted from every log line like the other trackers' keys).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

KINDS = ("jira", "gitlab", "asana")
#: Keys read under ``tracker.provider`` as well (beside the ones every tracker has).
PROVIDER_KEYS = ("base_url", "email", "api_token", "project_key", "project_path", "project_gid")
#: Which of :data:`PROVIDER_KEYS` each kind reads (a did-you-mean offers only those).
KIND_KEYS = {
    "jira": ("base_url", "email", "api_token", "project_key"),
    "gitlab": ("project_path",),
    "asana": ("project_gid",),
}


def foreign_keys(kind: Any) -> frozenset[str]:
    """The keys of :data:`PROVIDER_KEYS` a tracker of ``kind`` does not read."""
    own = KIND_KEYS.get(str(kind or "").strip().lower(), ())
    return frozenset(PROVIDER_KEYS) - set(own)


GITLAB_API_URL = "https://gitlab.com/api/v4"
ASANA_ENDPOINT = "https://app.asana.com/api/1.0"
JIRA_ACTIVE_STATES = ("To Do", "In Progress")
JIRA_TERMINAL_STATES = ("Done", "Closed", "Cancelled", "Canceled", "Won't Do", "Duplicate")
GITLAB_ACTIVE_STATES = ("opened",)
GITLAB_TERMINAL_STATES = ("closed",)
#: Environment variables each kind reads its credential from by default.
SECRET_NAMES = {
    "jira": ("JIRA_API_TOKEN",),
    "gitlab": ("GITLAB_PAT", "GITLAB_ACCESS_TOKEN"),
    "asana": ("ASANA_PAT",),
}
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _resolve(value: Any, env: Mapping[str, str], *fallback: str) -> str | None:
    """A setting's value: ``$VAR`` -> the environment's, a plain value as written; blank or
    unset -> the first non-empty ``fallback`` variable; surrounding whitespace dropped."""
    if isinstance(value, str) and value.strip():
        text = value.strip()
        name = text[1:].strip("{}") if text.startswith("$") else None
        if name is None or not name.replace("_", "a").isalnum():
            return text
        got = (env.get(name) or "").strip()
        if got:
            return got
    elif value is not None and not isinstance(value, str):
        return str(value)
    for name in fallback:
        got = (env.get(name) or "").strip()
        if got:
            return got
    return None


def _env_named(value: Any, env: Mapping[str, str], *fallback: str) -> str | None:
    """The variable a credential setting names: the ``$VAR`` written, else (nothing written)
    the first non-empty ``fallback`` one, else the first ``fallback``; None for a value
    written plainly."""
    if isinstance(value, str) and value.strip():
        text = value.strip()
        name = text[1:].strip("{}") if text.startswith("$") else None
        return name if name and name.replace("_", "a").isalnum() else None
    if value is not None:
        return None
    for name in fallback:
        if (env.get(name) or "").strip():
            return name
    return fallback[0] if fallback else None


def resolved(kind: str, tracker: Any, raw: Any, env: Mapping[str, str]) -> dict[str, Any]:
    """The updates ``resolve_settings`` applies to a ``kind`` tracker (``tracker`` is the
    :class:`TrackerSettings` with ``provider`` merged in, ``raw`` the front matter's
    ``tracker`` section as written)."""
    given = set(raw) if isinstance(raw, dict) else set()
    provider = raw.get("provider") if isinstance(raw, dict) else None
    if isinstance(provider, dict):
        given |= set(provider)
    out: dict[str, Any] = {}
    defaults: tuple[tuple[str, ...], tuple[str, ...]] | None
    if kind == "jira":
        token = tracker.api_token if tracker.api_token is not None else tracker.api_key
        out["api_key"] = _resolve(token, env, "JIRA_API_TOKEN")
        out["api_key_env"] = _env_named(token, env, "JIRA_API_TOKEN")
        out["base_url"] = _resolve(tracker.base_url, env, "JIRA_BASE_URL")
        out["email"] = _resolve(tracker.email, env, "JIRA_EMAIL")
        out["project_key"] = _resolve(tracker.project_key, env)
        defaults = (JIRA_ACTIVE_STATES, JIRA_TERMINAL_STATES)
    elif kind == "gitlab":
        token = tracker.api_key if tracker.api_key is not None else tracker.token
        out["api_key"] = _resolve(token, env, "GITLAB_PAT", "GITLAB_ACCESS_TOKEN")
        out["api_key_env"] = _env_named(token, env, "GITLAB_PAT", "GITLAB_ACCESS_TOKEN")
        url = _resolve(tracker.api_url, env) if "api_url" in given else None
        out["api_url"] = (url or GITLAB_API_URL).rstrip("/")
        out["project_path"] = _resolve(tracker.project_path, env, "GITLAB_PROJECT_PATH")
        defaults = (
            (GITLAB_ACTIVE_STATES, GITLAB_TERMINAL_STATES) if not tracker.state_labels else None
        )
    else:
        out["api_key"] = _resolve(tracker.api_key, env, "ASANA_PAT")
        out["api_key_env"] = _env_named(tracker.api_key, env, "ASANA_PAT")
        url = _resolve(tracker.endpoint, env) if "endpoint" in given else None
        out["endpoint"] = (url or ASANA_ENDPOINT).rstrip("/")
        out["project_gid"] = _resolve(tracker.project_gid, env)
        defaults = None
    if defaults is not None:
        if "active_states" not in given:
            out["active_states"] = defaults[0]
        if "terminal_states" not in given:
            out["terminal_states"] = defaults[1]
    return out


def problems(tracker: Any) -> list[str]:
    """What keeps a jira, gitlab or asana tracker from polling, one line each with its
    category (empty when it may)."""
    kind = (tracker.kind or "").strip().lower()
    out: list[str] = []
    if kind == "jira":
        out += _url_problem("jira", "base_url", tracker.base_url, "$JIRA_BASE_URL")
        if not tracker.email:
            out.append("missing_jira_email: tracker.email is not set (or $JIRA_EMAIL)")
        if not tracker.api_key:
            out.append(
                "missing_jira_api_token: no Jira API token (set tracker.api_token: $VAR, "
                "or $JIRA_API_TOKEN)"
            )
        if not tracker.project_key:
            out.append("missing_jira_project_key: tracker.project_key is not set")
    elif kind == "gitlab":
        out += _url_problem("gitlab", "api_url", tracker.api_url, None)
        if not tracker.api_key:
            out.append(
                "missing_gitlab_api_key: no GitLab token (set tracker.api_key: $VAR, "
                "or $GITLAB_PAT)"
            )
        path = tracker.project_path or ""
        if not path:
            out.append(
                "missing_gitlab_project_path: tracker.project_path is not set "
                "(group/project, or $GITLAB_PROJECT_PATH)"
            )
        elif any(c.isspace() or c == "\x00" for c in path) or path.strip("/") != path:
            out.append(
                f"invalid_gitlab_project_path: tracker.project_path {path!r} is not group/project"
            )
        if not tracker.state_labels:
            bad = [s for s in tracker.active_states if s.strip().lower() != "opened"]
            bad += [s for s in tracker.terminal_states if s.strip().lower() != "closed"]
            if bad:
                out.append(
                    f"invalid_gitlab_states: {', '.join(map(repr, bad))}: without "
                    "tracker.state_labels the states are opened (active) and closed (terminal)"
                )
    elif kind == "asana":
        out += _url_problem("asana", "endpoint", tracker.endpoint, None)
        if not tracker.api_key:
            out.append(
                "missing_asana_api_key: no Asana token (set tracker.api_key: $VAR, or $ASANA_PAT)"
            )
        if not tracker.project_gid:
            out.append("missing_asana_project_gid: tracker.project_gid is not set")
    return out


def _url_problem(kind: str, key: str, value: str | None, env: str | None) -> list[str]:
    if not value:
        hint = f" (or {env})" if env else ""
        return [f"invalid_{kind}_{key}: tracker.{key} is not set{hint}"]
    url = urlsplit(value)
    local = url.scheme == "http" and url.hostname in _LOOPBACK
    if not url.hostname or (url.scheme != "https" and not local) or url.query or url.fragment:
        return [f"invalid_{kind}_{key}: tracker.{key} {value!r} is not an https URL"]
    return []
