"""Strict Liquid prompt rendering (spec §5.4, §12).

Unknown variables and unknown filters are errors: a filter that does not exist is caught
when the template is compiled, an unknown variable when it is rendered. The workflow loader
does both (:func:`check_prompt` renders a sample issue), so a bad ``WORKFLOW.md`` fails at
start-up or keeps the last good one on reload, instead of failing every run. Compiled
templates are cached by their text.

Rendering is bounded (``bounded.py`` :data:`~symphony_tui.config.bounded.LIQUID_LIMITS`):
loop iterations, output size, assigned values and context depth; going over one is a
``template_render_error`` naming the limit, in one line.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from liquid import BoundTemplate, Environment, StrictUndefined
from liquid.exceptions import (
    ContextDepthError,
    LiquidError,
    LocalNamespaceLimitError,
    LoopIterationLimitError,
    OutputStreamLimitError,
    TemplateNotFoundError,
    UndefinedError,
)

from symphony_tui.config.bounded import LIQUID_LIMITS, run_within
from symphony_tui.config.errors import WorkflowError
from symphony_tui.domain import BlockerRef, Issue, IssueComment


class _BoundedEnvironment(Environment):
    """The prompt's Liquid environment with python-liquid's resource limits set."""

    loop_iteration_limit = LIQUID_LIMITS["loop_iteration_limit"]
    output_stream_limit = LIQUID_LIMITS["output_stream_limit"]
    local_namespace_limit = LIQUID_LIMITS["local_namespace_limit"]
    context_depth_limit = LIQUID_LIMITS["context_depth_limit"]


def _product_size(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """The characters ``join`` and ``replace`` would build (a product of their inputs'
    sizes, which python-liquid counts only once written), 0 for other filters."""
    if name == "join" and args and isinstance(args[0], list | tuple | range):
        separator = args[1] if len(args) > 1 else kwargs.get("separator", " ")
        return len(args[0]) * len(str(separator))
    if name == "replace" and len(args) >= 3 and isinstance(args[0], str):
        text, old = args[0], str(args[1])
        hits = text.count(old) if old else len(text) + 1
        return len(text) + hits * len(str(args[2]))
    return 0


def _guarded(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` within the loop and output limits before it runs: a range over the loop
    limit as its input or an argument is refused (a filter walks it like a loop,
    ``{{ (1..100000000) | join }}``), and so is a ``join`` or ``replace`` whose result
    would be over the output limit (python-liquid checks loops and written output only)."""
    loops = LIQUID_LIMITS["loop_iteration_limit"]
    output = LIQUID_LIMITS["output_stream_limit"]

    def guarded(*args: Any, **kwargs: Any) -> Any:
        for value in (*args, *kwargs.values()):
            if isinstance(value, range) and len(value) > loops:
                raise LoopIterationLimitError(f"range over the limit in '{name}'", token=None)
        if _product_size(name, args, kwargs) > output:
            raise OutputStreamLimitError(f"'{name}' result over the limit", token=None)
        return func(*args, **kwargs)

    for flag in ("with_context", "with_environment"):
        if getattr(func, flag, False):
            setattr(guarded, flag, True)
    return guarded


_ENV = _BoundedEnvironment(undefined=StrictUndefined, strict_filters=True)
_ENV.filters.update({name: _guarded(name, f) for name, f in _ENV.filters.items()})

#: What each python-liquid limit error means for the operator.
_LIMITS: tuple[tuple[type[LiquidError], str], ...] = (
    (LoopIterationLimitError, f"loops more than {LIQUID_LIMITS['loop_iteration_limit']} times"),
    (
        OutputStreamLimitError,
        f"renders more than {LIQUID_LIMITS['output_stream_limit']} characters",
    ),
    (
        LocalNamespaceLimitError,
        f"assigns more than {LIQUID_LIMITS['local_namespace_limit']} bytes of values",
    ),
    (ContextDepthError, f"nests more than {LIQUID_LIMITS['context_depth_limit']} levels deep"),
)


def _describe(err: LiquidError, first_line: int) -> str:
    for kind, what in _LIMITS:
        if isinstance(err, kind):
            return f"the prompt template {what}; refused"
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
    """What a prompt has, after an undefined top-level variable: ``issue``, ``attempt`` and
    ``retry_kind`` (some ports give the issue's fields at the top level, ``{{ identifier }}``)."""
    if not isinstance(err, UndefinedError):
        return ""
    name = getattr(err, "message", None) or str(err)
    if not (name.startswith("'") and name.endswith("' is undefined")):
        return ""  # a field of an object (issue.x), not a top-level variable
    variable = name[1 : -len("' is undefined")]
    if variable in issue.template_view():
        return f"; did you mean issue.{variable}?"
    return "; a prompt has the variables issue, attempt and retry_kind"


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


#: Tags that repeat a body: a template using one may run long on an issue's own data.
_REPEATING_TAGS = frozenset({"for", "tablerow", "include", "render"})


@lru_cache(maxsize=64)
def prompt_repeats(text: str, first_line: int = 1) -> bool:
    """Whether ``text`` has a loop (or an include): its cost then grows with the issue's
    data, and a worker renders it off the loop (:func:`render_prompt_within`); without one
    a render costs the template's and the issue's size, no more. Raises like
    :func:`compile_template`."""
    return bool(_REPEATING_TAGS & compile_template(text, first_line).analyze().tags.keys())


def render_prompt_within(
    template: str,
    issue: Issue,
    attempt: int | None,
    first_line: int = 1,
    retry_kind: str | None = None,
) -> str:
    """:func:`render_prompt` in a thread with the evaluation deadline (``bounded.py``);
    past it ``WorkflowError("template_render_error")``. Blocks the caller: a worker calls
    it through ``asyncio.to_thread``."""
    return run_within(
        lambda: render_prompt(template, issue, attempt, first_line, retry_kind=retry_kind),
        f"rendering the prompt for {issue.identifier}",
        code="template_render_error",
    )


def check_prompt(template: str, first_line: int = 1) -> None:
    """Render ``template`` for :data:`SAMPLE_ISSUE`, as a first run and as a retry, so an
    unknown variable fails the workflow load instead of every run. Raises ``WorkflowError``
    like :func:`render_prompt`."""
    for attempt, kind in ((None, None), (2, "failure")):
        render_prompt(template, SAMPLE_ISSUE, attempt, first_line, retry_kind=kind)
