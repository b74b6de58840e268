"""Typed workflow errors (spec §5.5) with one-line messages."""

from __future__ import annotations

import re

import yaml
from pydantic import ValidationError

from symphony_tui.text import one_line

_SECRETISH = re.compile(r"key|token|secret|password", re.IGNORECASE)

#: Error codes of :class:`WorkflowError` (spec §5.5, plus ``invalid_settings``).
WORKFLOW_ERROR_CODES = (
    "missing_workflow_file",
    "workflow_parse_error",
    "workflow_front_matter_not_a_map",
    "invalid_settings",
    "template_parse_error",
    "template_render_error",
)


class WorkflowError(Exception):
    """Loading or rendering ``WORKFLOW.md`` failed. ``str(err)`` is ``"<code>: <message>"``
    on one line; ``code`` is one of :data:`WORKFLOW_ERROR_CODES`."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = one_line(message)
        super().__init__(f"{code}: {self.message}")


def flatten_validation_error(err: ValidationError) -> str:
    """``polling.interval_ms: Input should be a valid integer; ...`` from pydantic errors."""
    parts = []
    for item in err.errors(include_url=False):
        loc = ".".join(str(p) for p in item.get("loc", ()) if p != "__root__")
        msg = item.get("msg", "invalid value")
        error = (item.get("ctx") or {}).get("error")
        if item.get("type") == "value_error" and error is not None:
            msg = str(error)  # a validator's own sentence, without pydantic's "Value error, "
        given = item.get("input")
        # The text written, when it is short and names no credential: a placeholder left
        # in a template (``port: <PORT>``) is then plain from the message alone.
        if (
            isinstance(given, str)
            and len(given) <= 40
            and not _SECRETISH.search(loc)
            and repr(given) not in msg
        ):
            msg = f"{msg} (got {given!r})"
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts) or str(err)


def yaml_error_at(err: yaml.YAMLError, source: str, first_line: int = 1) -> str:
    """``SOURCE:LINE:COLUMN: <problem>`` for a PyYAML error (the compilers' one-line form;
    ``SOURCE: <problem>`` when PyYAML gives no position), with ``(<context> at LINE:COLUMN)``
    when the problem was found away from its start; ``first_line`` is the file line where
    the parsed text starts (front matter starts on line 2). Lines and columns are 1-based."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err)
    if mark is None:
        return one_line(f"{source}: {problem}")
    # Where the unfinished construct began ("while parsing a flow sequence"), when PyYAML
    # found the problem elsewhere (often at the end of the front matter).
    context, start = getattr(err, "context", None), getattr(err, "context_mark", None)
    if context and start is not None and (start.line, start.column) != (mark.line, mark.column):
        problem += f" ({context} at {start.line + first_line}:{start.column + 1})"
    return one_line(f"{source}:{mark.line + first_line}:{mark.column + 1}: {problem}")


def describe_yaml_error(err: yaml.YAMLError, first_line: int = 1) -> str:
    """``at line L, column C: <problem>`` for a PyYAML error; ``first_line`` is the file
    line where the parsed text starts (front matter starts on line 2)."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err)
    if mark is None:
        return one_line(problem)
    return one_line(f"at line {mark.line + first_line}, column {mark.column + 1}: {problem}")
