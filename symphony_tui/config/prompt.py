"""Strict Liquid prompt rendering (spec §5.4, §12).

Unknown variables and unknown filters are errors: a filter that does not exist is caught
when the template is compiled, an unknown variable when it is rendered. The workflow loader
does both (:func:`check_prompt` renders a sample issue), so a bad ``WORKFLOW.md`` fails at
start-up or keeps the last good one on reload, instead of failing every run. Compiled
templates are cached by their text.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache

from liquid import BoundTemplate, Environment, StrictUndefined
from liquid.exceptions import LiquidError, TemplateNotFoundError, UndefinedError

from symphony_tui.config.errors import WorkflowError
from symphony_tui.domain import BlockerRef, Issue, IssueComment

_ENV = Environment(undefined=StrictUndefined, strict_filters=True)


def _describe(err: LiquidError, first_line: int) -> str:
    message = getattr(err, "message", None) or str(err).splitlines()[0]
    if isinstance(err, TemplateNotFoundError):
        # ``{% render "name" %}`` / ``{% include %}``: the prompt is the one WORKFLOW.md body.
        message = (
            f"template {message!r} not found: a prompt is the body of WORKFLOW.md alone; "
            "write the text of other template files into it"
        )
    token = getattr(err, "token", None)
    source = getattr(token, "source", None)
    start = getattr(token, "start_index", None)
    if isinstance(source, str) and isinstance(start, int) and 0 <= start <= len(source):
        line = source.count("\n", 0, start) + first_line
        return f"{message} (line {line})"
    return message


def _undefined_hint(err: LiquidError, issue: Issue) -> str:
    """What a prompt has, after an undefined top-level variable: ``issue`` and ``attempt``
    (some ports give the issue's fields at the top level, ``{{ identifier }}``)."""
    if not isinstance(err, UndefinedError):
        return ""
    name = getattr(err, "message", None) or str(err)
    if not (name.startswith("'") and name.endswith("' is undefined")):
        return ""  # a field of an object (issue.x), not a top-level variable
    variable = name[1 : -len("' is undefined")]
    if variable in issue.template_view():
        return f"; did you mean issue.{variable}?"
    return "; a prompt has the variables issue and attempt"


@lru_cache(maxsize=64)
def compile_template(text: str, first_line: int = 1) -> BoundTemplate:
    """Parse ``text`` once. Raises ``WorkflowError("template_parse_error")`` on bad syntax
    or a filter the environment does not define. ``first_line`` is the file line the
    template starts on, so errors name lines of ``WORKFLOW.md``."""
    try:
        template = _ENV.from_string(text)
    except LiquidError as err:
        raise WorkflowError("template_parse_error", _describe(err, first_line)) from err
    try:
        filters = template.analyze().filters
    except LiquidError as err:  # analysis walks the same tree; be defensive all the same
        raise WorkflowError("template_parse_error", _describe(err, first_line)) from err
    unknown = sorted(name for name in filters if name not in _ENV.filters)
    if unknown:
        first = filters[unknown[0]][0]
        line = text.count("\n", 0, first.index) + first_line
        raise WorkflowError("template_parse_error", f"unknown filter '{unknown[0]}' (line {line})")
    return template


def render_prompt(
    template: str,
    issue: Issue,
    attempt: int | None,
    first_line: int = 1,
    *,
    retry_kind: str | None = None,
) -> str:
    """Render the workflow prompt for ``issue``. ``attempt`` is ``None`` on the first run and
    a 1-based integer on retries and continuations; ``retry_kind`` (``continuation`` or
    ``failure``, ``None`` on a first run) tells them apart (spec §5.4, §12.3). Returns the
    text trimmed.
    ``first_line``: see :func:`compile_template`.

    Raises ``WorkflowError`` with ``template_parse_error`` or ``template_render_error``.
    """
    compiled = compile_template(template, first_line)
    try:
        rendered = compiled.render(
            issue=issue.template_view(), attempt=attempt, retry_kind=retry_kind
        )
    except LiquidError as err:
        message = _describe(err, first_line) + _undefined_hint(err, issue)
        raise WorkflowError("template_render_error", message) from err
    except (TypeError, ValueError, ArithmeticError) as err:
        raise WorkflowError("template_render_error", f"{type(err).__name__}: {err}") from err
    return rendered.strip()


#: An issue with every field set, to render a template against before any real issue.
SAMPLE_ISSUE = Issue(
    id="sample-1",
    identifier="SAMPLE-1",
    title="Sample issue",
    description="A sample description.",
    priority=2,
    state="Todo",
    branch_name="sample-1-issue",
    url="https://example.invalid/SAMPLE-1",
    labels=("sample",),
    assignees=("sample-user",),
    blocked_by=(BlockerRef(id="sample-0", identifier="SAMPLE-0", state="Done"),),
    created_at=datetime(2026, 1, 1, tzinfo=UTC),
    updated_at=datetime(2026, 1, 2, tzinfo=UTC),
    comments=(
        IssueComment(
            id="sample-comment-1",
            author="sample-user",
            body="A sample comment.",
            created_at=datetime(2026, 1, 2, tzinfo=UTC),
            url="https://example.invalid/SAMPLE-1#comment-1",
        ),
    ),
    repository="sample-owner/sample-repo",
)


def check_prompt(template: str, first_line: int = 1) -> None:
    """Render ``template`` for :data:`SAMPLE_ISSUE`, as a first run and as a retry, so an
    unknown variable fails the workflow load instead of every run. Raises ``WorkflowError``
    like :func:`render_prompt`."""
    for attempt, kind in ((None, None), (2, "failure")):
        render_prompt(template, SAMPLE_ISSUE, attempt, first_line, retry_kind=kind)
