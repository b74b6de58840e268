"""Which tracker data a prompt reads (config/prompt_inputs.py)."""

from __future__ import annotations

import pytest

from symphony_tui.config.prompt_inputs import uses_issue_comments


@pytest.mark.parametrize(
    ("template", "uses"),
    [
        ("{{ issue.title }}", False),
        ("{% for c in issue.comments %}{{ c.body }}{% endfor %}", True),
        ("{% if issue.comments.size > 0 %}x{% endif %}", True),
        ("{{ issue | size }}", True),
        ("{{ comments }}{{ issue.comment_count }}", False),
    ],
)
def test_uses_issue_comments(template: str, uses: bool) -> None:
    assert uses_issue_comments(template) is uses
