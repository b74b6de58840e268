"""Load ``WORKFLOW.md``: optional YAML front matter + prompt template (spec §5.1-§5.5, §6.1).

The file is read once; the front matter (between a first line ``---`` and the next line
``---``) must decode to a map; the rest, trimmed, is the prompt template. Unknown keys are
ignored so files written for the reference implementation load unchanged. The template is
compiled and rendered for a sample issue here, so a syntax error, an unknown filter or an
unknown variable fails the load, not every run. Keys nothing reads are reported in
``Workflow.warnings`` (logged by the store, printed by ``doctor``).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from symphony_tui.config.bounded import BudgetLoader, YamlBudgetExceeded, run_within
from symphony_tui.config.errors import (
    WorkflowError,
    flatten_validation_error,
    yaml_error_at,
)
from symphony_tui.config.prompt import check_prompt
from symphony_tui.config.settings import Settings, resolve_settings
from symphony_tui.config.unread import unread_warnings
from symphony_tui.observability.redact import register_secret

#: Used when the prompt body is empty (spec §5.4 allows a minimal default).
DEFAULT_PROMPT = (
    "You are working on issue {{ issue.identifier }}: {{ issue.title }}.\n"
    "{% if issue.description %}\n{{ issue.description }}\n{% endif %}"
)

_FENCE = "---"


@dataclass(frozen=True)
class Workflow:
    """One successfully loaded ``WORKFLOW.md``.

    ``raw`` is the front matter as parsed (``{}`` without front matter), ``settings`` the
    typed, resolved view of it, ``prompt_template`` the trimmed body (or
    :data:`DEFAULT_PROMPT`), ``fingerprint`` the SHA-256 of the file's bytes,
    ``prompt_first_line`` the file line the template starts on (for error messages),
    ``warnings`` one line per front-matter key nothing reads (:mod:`.unread`).
    """

    path: Path
    settings: Settings
    prompt_template: str
    raw: dict
    fingerprint: str
    prompt_first_line: int = 1
    warnings: tuple[str, ...] = ()


def split_front_matter(text: str) -> tuple[str | None, str]:
    """``(front_matter_or_None, body)``. Raises ``workflow_parse_error`` when the opening
    fence has no closing fence."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != _FENCE:
        return None, text
    for i in range(1, len(lines)):
        # At the start of its line only: an indented ``---`` is text of a block scalar
        # (a hook's script), not the end of the front matter.
        if lines[i].rstrip() == _FENCE:
            return "".join(lines[1:i]), "".join(lines[i + 1 :])
    raise WorkflowError(
        "workflow_parse_error", "front matter starts with '---' but has no closing '---' line"
    )


def shown_path(path: Path) -> str:
    """``path`` as an operator reads it in an error: relative to the working folder when it
    is inside it (``WORKFLOW.md``), else absolute."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _parse_yaml(front: str, path: Path) -> dict[str, Any]:
    try:
        # PyYAML's safe loader within the alias and size budgets (``bounded.py``).
        data = yaml.load(front, Loader=BudgetLoader)
    except YamlBudgetExceeded as err:
        raise WorkflowError("workflow_parse_error", f"{shown_path(path)}: {err}; refused") from None
    except yaml.YAMLError as err:
        # The opening fence is line 1, so the YAML text starts on line 2.
        where = yaml_error_at(err, shown_path(path), first_line=2)
        raise WorkflowError("workflow_parse_error", where) from err
    except RecursionError:
        raise WorkflowError(
            "workflow_parse_error", f"{shown_path(path)}: the front matter is nested too deeply"
        ) from None
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as err:
        # A tagged value its constructor cannot build (``!!int abc``, ``!!timestamp x``):
        # PyYAML raises the constructor's own error, without a position.
        raise WorkflowError(
            "workflow_parse_error",
            f"{shown_path(path)}: a tagged value cannot be read ({type(err).__name__}: {err})",
        ) from err
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise WorkflowError(
            "workflow_front_matter_not_a_map",
            f"front matter must be a map of settings, got {type(data).__name__}",
        )
    return data


def parse_workflow(path: Path, data: bytes, env: dict[str, str] | None = None) -> Workflow:
    """Build a :class:`Workflow` from the bytes of ``path`` (see :func:`load_workflow`)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise WorkflowError("workflow_parse_error", f"{path} is not UTF-8 text: {err}") from err
    front, body = split_front_matter(text)
    raw = _parse_yaml(front, path) if front is not None else {}
    variants: list[str] = []
    try:
        settings = resolve_settings(raw, path.parent, env, variants)
    except ValidationError as err:
        raise WorkflowError("invalid_settings", flatten_validation_error(err)) from err
    except (TypeError, ValueError) as err:
        raise WorkflowError("invalid_settings", str(err)) from err
    # Every configured secret is masked, whatever the tracker (a local tracker does not
    # read $LINEAR_API_KEY, but the hooks' and agents' output may still print it).
    register_secret(settings.tracker.api_key)
    environ = os.environ if env is None else env
    for name in settings.tracker.secret_env_names:
        register_secret(environ.get(name))
    prompt = body.strip() or DEFAULT_PROMPT
    first_line = _body_first_line(text, body) if body.strip() else 1
    check_prompt(prompt, first_line)
    return Workflow(
        path=path,
        settings=settings,
        prompt_template=prompt,
        raw=raw,
        fingerprint=hashlib.sha256(data).hexdigest(),
        prompt_first_line=first_line,
        warnings=(*variants, *unread_warnings(raw)),
    )


def _body_first_line(text: str, body: str) -> int:
    """The line of ``text`` (1-based) on which the trimmed prompt ``body`` starts."""
    start = len(text) - len(body) + (len(body) - len(body.lstrip()))
    return text.count("\n", 0, start) + 1


def load_workflow(path: Path, env: dict[str, str] | None = None) -> Workflow:
    """Read and parse ``WORKFLOW.md`` at ``path``.

    ``env`` replaces ``os.environ`` for ``$VAR`` indirection (tests). Relative paths in the
    settings are relative to the file's folder. Raises :class:`WorkflowError`
    (``missing_workflow_file``, ``workflow_parse_error``, ``workflow_front_matter_not_a_map``,
    ``invalid_settings``, ``template_parse_error``).
    """
    path = Path(path).expanduser().absolute()
    try:
        data = path.read_bytes()
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise WorkflowError("missing_workflow_file", f"cannot read {path}: {reason}") from err
    return parse_within(path, data, env)


def parse_within(path: Path, data: bytes, env: dict[str, str] | None = None) -> Workflow:
    """:func:`parse_workflow` in a thread with the evaluation deadline (``bounded.py``):
    raises ``WorkflowError("workflow_parse_error")`` past it. Blocks the caller."""
    return run_within(lambda: parse_workflow(path, data, env), f"evaluating {shown_path(path)}")
