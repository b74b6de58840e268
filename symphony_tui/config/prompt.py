"""Strict Liquid prompt rendering (spec §5.4, §12).

Unknown variables and unknown filters are errors: a filter that does not exist is caught
when the template is compiled (so a bad ``WORKFLOW.md`` fails at load time), an unknown
variable when it is rendered. Compiled templates are cached by their text.
"""

from __future__ import annotations

from functools import lru_cache

from liquid import BoundTemplate, Environment, StrictUndefined
from liquid.exceptions import LiquidError

from symphony_tui.config.errors import WorkflowError
from symphony_tui.domain import Issue

_ENV = Environment(undefined=StrictUndefined, strict_filters=True)


def _describe(err: LiquidError) -> str:
    message = getattr(err, "message", None) or str(err).splitlines()[0]
    token = getattr(err, "token", None)
    source = getattr(token, "source", None)
    start = getattr(token, "start_index", None)
    if isinstance(source, str) and isinstance(start, int) and 0 <= start <= len(source):
        line = source.count("\n", 0, start) + 1
        return f"{message} (line {line})"
    return message


@lru_cache(maxsize=64)
def compile_template(text: str) -> BoundTemplate:
    """Parse ``text`` once. Raises ``WorkflowError("template_parse_error")`` on bad syntax
    or a filter the environment does not define."""
    try:
        template = _ENV.from_string(text)
    except LiquidError as err:
        raise WorkflowError("template_parse_error", _describe(err)) from err
    try:
        filters = template.analyze().filters
    except LiquidError as err:  # analysis walks the same tree; be defensive all the same
        raise WorkflowError("template_parse_error", _describe(err)) from err
    unknown = sorted(name for name in filters if name not in _ENV.filters)
    if unknown:
        first = filters[unknown[0]][0]
        line = text.count("\n", 0, first.index) + 1
        raise WorkflowError("template_parse_error", f"unknown filter '{unknown[0]}' (line {line})")
    return template


def render_prompt(template: str, issue: Issue, attempt: int | None) -> str:
    """Render the workflow prompt for ``issue``. ``attempt`` is ``None`` on the first run and
    an integer on retries and continuations (spec §5.4). Returns the text trimmed.

    Raises ``WorkflowError`` with ``template_parse_error`` or ``template_render_error``.
    """
    compiled = compile_template(template)
    try:
        rendered = compiled.render(issue=issue.template_view(), attempt=attempt)
    except LiquidError as err:
        raise WorkflowError("template_render_error", _describe(err)) from err
    except (TypeError, ValueError, ArithmeticError) as err:
        raise WorkflowError("template_render_error", f"{type(err).__name__}: {err}") from err
    return rendered.strip()
