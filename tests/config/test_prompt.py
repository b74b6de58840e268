"""Spec §17.1: prompt template renders ``issue`` and ``attempt``; strict mode fails."""

from __future__ import annotations

import pytest

from symphony_tui.config.errors import WorkflowError
from symphony_tui.config.prompt import compile_template, render_prompt
from symphony_tui.domain import Issue


def test_prompt_template_renders_issue_and_attempt(issue: Issue) -> None:
    template = (
        "{{ issue.identifier }}|{{ issue.title }}|{{ issue.state }}|{{ issue.priority }}|"
        "{% for l in issue.labels %}[{{ l }}]{% endfor %}|"
        "{% for b in issue.blocked_by %}{{ b.identifier }}={{ b.state }}{% endfor %}|"
        "{{ issue.created_at }}|{% if attempt %}retry {{ attempt }}{% else %}first{% endif %}"
    )
    first = render_prompt(template, issue, None)
    assert first == (
        "ABC-1|Fix the flux capacitor|Todo|2|[bug][easy]|ABC-0=Done|2026-11-01T09:00:00Z|first"
    )
    assert render_prompt(template, issue, 2).endswith("|retry 2")


def test_labels_and_blockers_are_iterable_with_filters(issue: Issue) -> None:
    text = render_prompt("{{ issue.labels | join: ',' }} {{ issue.blocked_by | size }}", issue, 1)
    assert text == "bug,easy 1"


def test_null_fields_are_defined_but_falsy(issue: Issue) -> None:
    bare = issue.model_copy(update={"description": None, "url": None})
    text = render_prompt(
        "{% if issue.description %}D{% else %}none{% endif %}{{ issue.url }}", bare, None
    )
    assert text == "none"


def test_prompt_rendering_fails_on_unknown_variables(issue: Issue) -> None:
    with pytest.raises(WorkflowError) as info:
        render_prompt("Hello {{ customer.name }}", issue, None)
    assert info.value.code == "template_render_error"
    assert "customer" in info.value.message
    assert "\n" not in str(info.value)


def test_prompt_rendering_fails_on_unknown_issue_fields(issue: Issue) -> None:
    with pytest.raises(WorkflowError) as info:
        render_prompt("{{ issue.live_workpad_comment_id }}", issue, None)
    assert info.value.code == "template_render_error"


def test_prompt_rendering_fails_on_unknown_filters(issue: Issue) -> None:
    with pytest.raises(WorkflowError) as info:
        render_prompt("{{ issue.title | frobnicate }}", issue, None)
    assert info.value.code == "template_parse_error"
    assert "frobnicate" in info.value.message


def test_template_syntax_error_is_a_parse_error_with_line(issue: Issue) -> None:
    with pytest.raises(WorkflowError) as info:
        render_prompt("one\ntwo\n{% if %}", issue, None)
    assert info.value.code == "template_parse_error"
    assert "line 3" in info.value.message


def test_filter_argument_errors_are_render_errors(issue: Issue) -> None:
    with pytest.raises(WorkflowError) as info:
        render_prompt("{{ issue.priority | divided_by: 0 }}", issue, None)
    assert info.value.code == "template_render_error"


def test_compiled_templates_are_cached_by_text() -> None:
    assert compile_template("cache {{ x }}") is compile_template("cache {{ x }}")


def test_prompt_gets_the_current_issue_fields_and_retry_kind(issue: Issue) -> None:
    routed = issue.model_copy(
        update={"native_ref": {"project_item_id": "PVTI_1"}, "assignee_id": "u-7"}
    )
    template = (
        "{{ issue.native_ref.project_item_id }} {{ issue.assignee_id }} "
        "{{ issue.dispatchable }} {{ attempt }} {{ retry_kind }}"
    )
    assert render_prompt(template, routed, 3, retry_kind="failure") == "PVTI_1 u-7 true 3 failure"
    assert render_prompt(template, routed, None) == "PVTI_1 u-7 true"
