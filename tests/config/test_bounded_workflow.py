"""A hostile WORKFLOW.md costs one clear line: the Liquid prompt within python-liquid's
limits, the YAML front matter within an alias and size budget, both within a deadline
(config/bounded.py); ``doctor`` evaluates the file the same way."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import pytest

from symphony_tui.config import bounded
from symphony_tui.config.errors import WorkflowError
from symphony_tui.config.workflow import load_workflow
from symphony_tui.doctor import run_doctor

HEAD = "---\ntracker:\n  kind: local\n  path: issues.yaml\n"


def alias_bomb(levels: int = 9) -> str:
    """A billion-laughs front matter under a free-form key (9**levels strings expanded)."""
    lines = [
        "codex:",
        "  turn_sandbox_policy:",
        '    a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
    ]
    for i in range(1, levels):
        lines.append(f"    a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]")
    return "\n".join(lines) + "\n"


def workflow(tmp_path: Path, front: str, prompt: str = "Work on {{ issue.identifier }}") -> Path:
    (tmp_path / "issues.yaml").write_text("issues: []\n")
    path = tmp_path / "WORKFLOW.md"
    path.write_text(f"{HEAD}{front}---\n{prompt}\n")
    return path


def refusal(path: Path) -> str:
    with pytest.raises(WorkflowError) as info:
        load_workflow(path)
    line = str(info.value)
    assert "\n" not in line
    return line


def test_a_hundred_million_iteration_loop_is_one_line(tmp_path: Path) -> None:
    path = workflow(tmp_path, "", "{% for i in (1..100000000) %}{{ i }}{% endfor %}")
    assert refusal(path) == (
        "template_render_error: the prompt template loops more than 100000 times; refused"
    )


def test_a_filter_over_a_huge_range_is_refused_like_a_loop(tmp_path: Path) -> None:
    path = workflow(tmp_path, "", "{{ (1..100000000) | join: ',' }}")
    assert "loops more than 100000 times" in refusal(path)


def test_join_and_replace_results_over_the_output_limit_are_refused(tmp_path: Path) -> None:
    wide = "y" * 100
    join = "{{ (1..90000) | join: '" + wide + "' }}"
    assert "renders more than 2000000 characters" in refusal(workflow(tmp_path, "", join))
    replace = '{% assign a = "' + "a" * 100 + '" %}{{ a | replace: "a", "' + "b" * 30000 + '" }}'
    assert "renders more than 2000000 characters" in refusal(workflow(tmp_path, "", replace))
    fine = "{{ issue.labels | join: ', ' }} {{ issue.title | replace: 'Sample', 'A' }}"
    assert load_workflow(workflow(tmp_path, "", fine)).prompt_template == fine


def test_output_and_assigned_values_are_bounded(tmp_path: Path) -> None:
    grow = '{% assign s = "xxxxxxxxxx" %}{% for i in (1..40) %}{% assign s = s | append: s %}{% endfor %}'
    assert "assigns more than" in refusal(workflow(tmp_path, "", grow))
    wide = "{% for i in (1..90000) %}" + "x" * 100 + "{% endfor %}"
    assert "renders more than" in refusal(workflow(tmp_path, "", wide))


def test_a_yaml_alias_bomb_under_a_free_form_key_is_one_line(tmp_path: Path) -> None:
    path = workflow(tmp_path, alias_bomb())
    assert refusal(path) == (
        f"workflow_parse_error: {path}: the front matter expands to more than 200000 values "
        "through its aliases (&anchor / *alias); refused"
    )


def test_aliases_within_the_budget_still_load(tmp_path: Path) -> None:
    front = "hooks:\n  before_run: &prep echo prep\n  after_create: *prep\n" + alias_bomb(3)
    wf = load_workflow(workflow(tmp_path, front))
    assert wf.settings.hooks.after_create == "echo prep"


def test_too_many_aliases_and_a_recursive_alias_are_refused(tmp_path: Path) -> None:
    many = "x:\n  a: &a 1\n  b: [" + ",".join(["*a"] * 1001) + "]\n"
    assert "more than 1000 aliases" in refusal(workflow(tmp_path, many))
    recursive = "x: &r\n  - *r\n"
    assert "expands to more than" in refusal(workflow(tmp_path, recursive))


def test_an_evaluation_past_its_deadline_is_one_line() -> None:
    release = threading.Event()
    with pytest.raises(WorkflowError) as info:
        bounded.run_within(lambda: release.wait(30), "evaluating WORKFLOW.md", deadline_s=0.05)
    release.set()  # the thread ends
    assert str(info.value) == (
        "workflow_parse_error: evaluating WORKFLOW.md took longer than 0.05 s; refused"
    )


@pytest.mark.parametrize("bomb", ["loop", "aliases"])
def test_doctor_reports_each_bomb_in_one_line(tmp_path: Path, bomb: str) -> None:
    if bomb == "loop":
        path = workflow(tmp_path, "", "{% for i in (1..100000000) %}x{% endfor %}")
    else:
        path = workflow(tmp_path, alias_bomb())
    out = io.StringIO()
    assert run_doctor(str(path), out, timeout=5) == 1
    failed = [line for line in out.getvalue().splitlines() if line.startswith("[FAIL]")]
    assert len(failed) == 1 and failed[0].startswith("[FAIL] workflow: ")
    assert ("loops more than" if bomb == "loop" else "expands to more than") in failed[0]
