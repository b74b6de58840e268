"""Which tracker data a prompt template reads, so a worker fetches only what it uses.

``issue.comments`` costs the tracker a request per run (GitHub and Linear list an issue's
comments separately from the issue), so a worker reads them only for a template that
names them (or hands the whole ``issue`` object to a filter or tag).
"""

from __future__ import annotations

from functools import lru_cache

from symphony_tui.config.prompt import compile_template


@lru_cache(maxsize=64)
def uses_issue_comments(template: str, first_line: int = 1) -> bool:
    """Whether ``template`` reads ``issue.comments`` (or ``issue`` as a whole). Raises
    ``WorkflowError("template_parse_error")`` like :func:`~.prompt.compile_template`."""
    analysis = compile_template(template, first_line).analyze()
    for variable in analysis.variables.get("issue", ()):
        segments = list(variable.segments)
        if segments == ["issue"] or segments[1:2] == ["comments"]:
            return True
    return False
