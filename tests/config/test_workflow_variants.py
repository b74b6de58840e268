"""Port variants of settings with one clear meaning are read, with a warning; without one,
the load fails with one line naming the key and what is expected (config/variants.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from symphony_tui.config.errors import WorkflowError
from symphony_tui.config.workflow import load_workflow

HEAD = "tracker:\n  kind: linear\n  project_slug: demo\n"


def load(write_workflow, front: str, body: str = "{{ issue.identifier }}"):
    return load_workflow(write_workflow(f"---\n{HEAD}{front}---\n{body}\n"), env={})


@pytest.mark.parametrize(
    ("written", "policy"),
    [
        ("danger-full-access", "dangerFullAccess"),
        ("dangerFullAccess", "dangerFullAccess"),
        ("workspace-write", "workspaceWrite"),
        ("workspace_write", "workspaceWrite"),
        ("read-only", "readOnly"),
    ],
)
def test_sandbox_policy_string_is_read_as_its_map(write_workflow, written, policy) -> None:
    wf = load(write_workflow, f"codex:\n  turn_sandbox_policy: {written}\n")
    assert wf.settings.codex.turn_sandbox_policy == {"type": policy}
    assert wf.warnings == (
        f"codex.turn_sandbox_policy: the string '{written}' is read as {{type: {policy}}}",
    )
    assert wf.raw["codex"]["turn_sandbox_policy"] == written  # the file as written


def test_unknown_sandbox_policy_string_fails_naming_the_key(write_workflow) -> None:
    with pytest.raises(WorkflowError) as info:
        load(write_workflow, "codex:\n  turn_sandbox_policy: full-trust\n")
    assert info.value.code == "invalid_settings"
    assert str(info.value) == (
        "invalid_settings: codex.turn_sandbox_policy: 'full-trust' is not a sandbox policy; "
        "expected a map such as {type: workspaceWrite} or one of read-only, workspace-write, "
        "danger-full-access, external-sandbox"
    )


def test_null_hooks_are_no_hooks_with_a_warning(write_workflow) -> None:
    wf = load(write_workflow, "hooks:\n  after_create: null\n  before_run: ~\n")
    assert wf.settings.hooks.after_create is None
    assert wf.settings.hooks.before_run is None
    assert wf.warnings == (
        "hooks.after_create: null is read as no hook",
        "hooks.before_run: null is read as no hook",
    )


def test_empty_hook_list_is_no_hook(write_workflow) -> None:
    wf = load(write_workflow, "hooks:\n  before_remove: []\n")
    assert wf.settings.hooks.before_remove is None
    assert wf.warnings == ("hooks.before_remove: an empty list is read as no hook",)


def test_hook_list_runs_its_lines_in_order_and_stops_at_the_first_failure(
    write_workflow, tmp_path: Path
) -> None:
    front = (
        "hooks:\n  after_create:\n    - echo one >> log\n    - 'false'\n    - echo three >> log\n"
    )
    wf = load(write_workflow, front)
    assert wf.warnings == (
        "hooks.after_create: a list of 3 command lines is read as one script that runs each "
        "line in order and stops at the first that fails",
    )
    script = wf.settings.hooks.after_create
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, check=False)
    assert done.returncode != 0
    assert (tmp_path / "log").read_text() == "one\n"


def test_hook_list_with_a_map_fails_naming_the_entry(write_workflow) -> None:
    with pytest.raises(WorkflowError) as info:
        load(write_workflow, "hooks:\n  after_run:\n    - echo ok\n    - run: make\n")
    assert str(info.value) == (
        "invalid_settings: hooks.after_run: expected a script (text) or a list of command "
        "lines; entry 2 is a map"
    )


def test_null_for_a_setting_with_a_default_is_the_default(write_workflow) -> None:
    wf = load(
        write_workflow,
        "codex:\n  thread_sandbox: null\npolling:\n  interval_ms: null\nserver:\n  port: null\n",
    )
    assert wf.settings.codex.thread_sandbox == "workspace-write"
    assert wf.settings.polling.interval_ms == 30_000
    assert wf.settings.server.port is None  # null is its own default: nothing to say
    assert wf.warnings == (
        "codex.thread_sandbox: null is read as the default (workspace-write)",
        "polling.interval_ms: null is read as the default (30000)",
    )


def test_placeholder_for_a_number_names_what_was_written(write_workflow) -> None:
    with pytest.raises(WorkflowError) as info:
        load(write_workflow, "server:\n  port: __PORT__\n")
    assert str(info.value).endswith("(got '__PORT__')")


def test_a_validators_sentence_is_the_message_said_once(write_workflow) -> None:
    with pytest.raises(WorkflowError) as info:
        load(write_workflow, "worker:\n  codex_mode: exec\n")
    assert str(info.value) == (
        "invalid_settings: worker.codex_mode: codex_mode 'exec' is not one of "
        "app-server, exec-server"
    )


def test_credentials_are_not_repeated_in_errors(write_workflow) -> None:
    with pytest.raises(WorkflowError) as info:
        load(write_workflow, "tracker:\n  kind: linear\n  api_key: [lin_api_secret]\n")
    assert "lin_api_secret" not in str(info.value)


def test_prompt_rendering_a_template_file_says_prompts_are_one_file(write_workflow) -> None:
    with pytest.raises(WorkflowError) as info:
        load(write_workflow, "", body='Hi\n{% render "guardrails" %}')
    assert str(info.value) == (
        "template_parse_error: template 'guardrails' not found: a prompt is the body of "
        "WORKFLOW.md alone; write the text of other template files into it (line 7)"
    )


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (
            "{{ identifier }}: {{ title }}",
            "'identifier' is undefined (line 6); did you mean issue.identifier?",
        ),
        (
            "{% if stage == 'review' %}x{% endif %}",
            "'stage' is undefined (line 6); a prompt has the variables issue, attempt and retry_kind",
        ),
        ("{{ issue.workpad_id }}", "issue.workpad_id is undefined (line 6)"),
    ],
)
def test_undefined_prompt_variables_say_what_a_prompt_has(write_workflow, body, error) -> None:
    with pytest.raises(WorkflowError) as info:
        load(write_workflow, "", body=body)
    assert str(info.value) == f"template_render_error: {error}"
