"""Spec §17.1 Workflow and Config Parsing: the loader and typed settings."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from symphony_tui.config.errors import WorkflowError
from symphony_tui.config.prompt import render_prompt
from symphony_tui.config.settings import LINEAR_ENDPOINT, default_workspace_root
from symphony_tui.config.workflow import (
    DEFAULT_PROMPT,
    load_workflow,
)
from symphony_tui.observability.redact import redact
from symphony_tui.paths import resolve_workflow_path

FIXTURES = Path(__file__).parent / "fixtures"


def test_explicit_runtime_path_is_used_when_provided(tmp_path: Path) -> None:
    assert resolve_workflow_path(str(tmp_path / "x" / "FLOW.md")) == tmp_path / "x" / "FLOW.md"


def test_cwd_default_is_workflow_md_when_no_path_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_workflow_path(None) == tmp_path / "WORKFLOW.md"


def test_missing_workflow_file_returns_typed_error(tmp_path: Path) -> None:
    with pytest.raises(WorkflowError) as info:
        load_workflow(tmp_path / "WORKFLOW.md")
    assert info.value.code == "missing_workflow_file"
    assert str(info.value).startswith("missing_workflow_file: cannot read ")
    assert "\n" not in str(info.value)


def test_a_directory_is_a_missing_workflow_file(tmp_path: Path) -> None:
    (tmp_path / "WORKFLOW.md").mkdir()
    with pytest.raises(WorkflowError) as info:
        load_workflow(tmp_path / "WORKFLOW.md")
    assert info.value.code == "missing_workflow_file"


def test_invalid_yaml_front_matter_returns_typed_error(write_workflow) -> None:
    path = write_workflow("---\ntracker:\n  kind: [linear\n---\nhello\n")
    with pytest.raises(WorkflowError) as info:
        load_workflow(path)
    assert info.value.code == "workflow_parse_error"
    # The line is said as SOURCE:LINE:COLUMN: found at the end of the front matter (line 4),
    # begun on line 3 (the fence is line 1).
    assert info.value.message == (
        f"{path}:4:1: expected ',' or ']', but got '<stream end>'"
        " (while parsing a flow sequence at 3:9)"
    )
    assert "\n" not in str(info.value)


def test_a_yaml_syntax_error_is_one_line_with_file_line_and_column(
    write_workflow, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_workflow("---\ntracker:\n  kind: local\n  path: a: b\n---\nhello\n")
    monkeypatch.chdir(path.parent)  # shown relative to the working folder, as typed
    with pytest.raises(WorkflowError) as info:
        load_workflow(path)
    assert str(info.value) == (
        "workflow_parse_error: WORKFLOW.md:4:10: mapping values are not allowed here"
    )


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("!!int abc", "ValueError"),
        ("!!float abc", "ValueError"),
        ("!!timestamp notadate", "AttributeError"),
        ("!<tag:yaml.org,2002:bool> maybe", "KeyError"),
    ],
)
def test_a_tagged_value_yaml_cannot_build_is_one_line(
    write_workflow, monkeypatch: pytest.MonkeyPatch, value: str, error: str
) -> None:
    path = write_workflow(f"---\ntracker:\n  kind: local\nx: {value}\n---\nhello\n")
    monkeypatch.chdir(path.parent)
    with pytest.raises(WorkflowError) as info:
        load_workflow(path)
    assert info.value.code == "workflow_parse_error"
    assert str(info.value).startswith(
        f"workflow_parse_error: WORKFLOW.md: a tagged value cannot be read ({error}: "
    )
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "nesting",
    ["[" * 5000, "{a: " * 800, "\n" + "".join(" " * (i + 1) + "a:\n" for i in range(400))],
    ids=["flow-sequences", "flow-maps", "block-maps"],
)
def test_front_matter_nested_too_deeply_is_one_line(write_workflow, nesting: str) -> None:
    """Flow nesting stops at the loader's depth budget (PyYAML's scanner would take seconds
    over it); block nesting at Python's recursion limit."""
    path = write_workflow(f"---\nx: {nesting}\n---\nhello\n")
    with pytest.raises(WorkflowError) as info:
        load_workflow(path)
    assert info.value.code == "workflow_parse_error"
    assert "the front matter is nested too deeply" in str(info.value)
    assert "\n" not in str(info.value)


def test_an_indented_fence_in_a_block_scalar_does_not_end_the_front_matter(
    write_workflow,
) -> None:
    path = write_workflow(
        "---\nhooks:\n  after_run: |\n    echo a\n    ---\n    echo b\n"
        "tracker:\n  kind: local\n---\nthe prompt\n"
    )
    wf = load_workflow(path)
    assert wf.settings.hooks.after_run == "echo a\n---\necho b\n"
    assert wf.settings.tracker.kind == "local"
    assert wf.prompt_template.strip() == "the prompt"


def test_unclosed_front_matter_is_a_parse_error(write_workflow) -> None:
    path = write_workflow("---\ntracker:\n  kind: linear\nhello\n")
    with pytest.raises(WorkflowError) as info:
        load_workflow(path)
    assert info.value.code == "workflow_parse_error"


def test_non_utf8_file_is_a_parse_error(tmp_path: Path) -> None:
    path = tmp_path / "WORKFLOW.md"
    path.write_bytes(b"---\nx: \xff\xfe\n---\n")
    with pytest.raises(WorkflowError) as info:
        load_workflow(path)
    assert info.value.code == "workflow_parse_error"


@pytest.mark.parametrize("front", ["- a\n- b\n", "just a string\n", "42\n"])
def test_front_matter_non_map_returns_typed_error(write_workflow, front: str) -> None:
    path = write_workflow(f"---\n{front}---\nprompt\n")
    with pytest.raises(WorkflowError) as info:
        load_workflow(path)
    assert info.value.code == "workflow_front_matter_not_a_map"


def test_invalid_setting_types_are_one_line_invalid_settings(write_workflow) -> None:
    path = write_workflow("---\npolling:\n  interval_ms: soon\nagent:\n  max_turns: 0\n---\n")
    with pytest.raises(WorkflowError) as info:
        load_workflow(path)
    err = info.value
    assert err.code == "invalid_settings"
    assert "polling.interval_ms: Input should be a valid integer" in err.message
    assert "agent.max_turns" in err.message
    assert "\n" not in str(err)


@pytest.mark.parametrize("value", ["0", "-5", "soon"])
def test_a_hook_shutdown_grace_must_be_a_positive_number(write_workflow, value: str) -> None:
    path = write_workflow(f"---\nhooks:\n  shutdown_grace_ms: {value}\n---\n")
    with pytest.raises(WorkflowError) as info:
        load_workflow(path)
    assert info.value.code == "invalid_settings"
    assert "hooks.shutdown_grace_ms" in info.value.message and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("-1", "greater than or equal to 0"),
        ("yes", "Input should be a whole number, not true"),
        ("later", "Input should be a valid integer"),
        ("2592000001", "less than or equal to 2592000000"),
    ],
)
def test_keep_terminal_ms_is_a_whole_number_of_milliseconds(write_workflow, value, problem):
    path = write_workflow(f"---\nworkspace:\n  keep_terminal_ms: {value}\n---\n")
    with pytest.raises(WorkflowError) as info:
        load_workflow(path)
    assert info.value.code == "invalid_settings"
    assert info.value.message.startswith("workspace.keep_terminal_ms: ")
    assert problem in info.value.message and "\n" not in str(info.value)
    ok = write_workflow("---\nworkspace:\n  keep_terminal_ms: 86400000\n---\n")
    assert load_workflow(ok).settings.workspace.keep_terminal_ms == 86_400_000


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("true", "Input should be a whole number, not true"),
        ("false", "Input should be a whole number, not false"),
        ("3600001", "less than or equal to 3600000"),
        ("1e30", "Input should be"),
    ],
)
def test_a_hook_shutdown_grace_refuses_booleans_and_absurd_values(
    write_workflow, value: str, problem: str
) -> None:
    # PyYAML reads `true` as a boolean, which pydantic's lax int would take as 1 (ms).
    path = write_workflow(f"---\nhooks:\n  shutdown_grace_ms: {value}\n---\n")
    with pytest.raises(WorkflowError) as info:
        load_workflow(path)
    assert info.value.code == "invalid_settings"
    assert info.value.message.startswith("hooks.shutdown_grace_ms: ")
    assert problem in info.value.message and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "key",
    [
        "hooks.timeout_ms",
        "polling.interval_ms",
        "tracker.timeout_ms",
        "agent.max_retry_backoff_ms",
        "agent.approval_timeout_ms",
        "agent.turn_timeout_ms",
        "agent.stall_timeout_ms",
        "codex.turn_timeout_ms",
        "codex.read_timeout_ms",
        "codex.stall_timeout_ms",
        "openhands.startup_timeout_ms",
        "openhands.read_timeout_ms",
        "opencode.startup_timeout_ms",
        "notify.command_timeout_ms",
        "worker.connect_timeout_ms",
        "worker.down_backoff_ms",
        "worker.down_backoff_max_ms",
        "agent.max_turns",
        "agent.max_concurrent_agents",
        "server.port",
    ],
)
def test_no_number_setting_takes_a_boolean_for_1(write_workflow, key: str) -> None:
    section, name = key.split(".")
    for value, limit in (("true", "not true"), ("2592000001", "less than or equal to")):
        path = write_workflow(f"---\n{section}:\n  {name}: {value}\n---\n")
        if value != "true" and not name.endswith("_ms"):
            continue
        with pytest.raises(WorkflowError) as info:
            load_workflow(path)
        assert info.value.message.startswith(f"{key}: "), info.value.message
        assert limit in info.value.message


def test_a_hook_shutdown_grace_is_read_in_milliseconds(write_workflow) -> None:
    path = write_workflow("---\nhooks:\n  shutdown_grace_ms: 2500\n---\n")
    assert load_workflow(path, env={}).settings.hooks.shutdown_grace_ms == 2500


def test_no_front_matter_means_empty_config_and_whole_file_prompt(write_workflow) -> None:
    path = write_workflow("\n\n  Do {{ issue.identifier }} now.  \n\n")
    wf = load_workflow(path)
    assert wf.raw == {}
    assert wf.prompt_template == "Do {{ issue.identifier }} now."


def test_config_defaults_apply_when_optional_values_are_missing(
    write_workflow, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_workflow("---\ntracker:\n  kind: linear\n---\nhi\n")
    wf = load_workflow(path, env={})
    s = wf.settings
    assert s.tracker.endpoint == LINEAR_ENDPOINT
    assert s.tracker.active_states == ("Todo", "In Progress")
    assert s.tracker.terminal_states == ("Closed", "Cancelled", "Canceled", "Duplicate", "Done")
    assert s.polling.interval_ms == 30_000
    assert s.workspace.root == str(Path(default_workspace_root()).resolve())
    assert s.hooks.timeout_ms == 60_000
    assert s.hooks.shutdown_grace_ms == 10_000
    assert s.hooks.after_create is None
    assert s.agent.max_concurrent_agents == 10
    assert s.agent.max_turns == 20
    assert s.agent.max_retry_backoff_ms == 300_000
    assert s.agent.max_concurrent_agents_by_state == {}
    assert s.codex.command == "codex app-server"
    assert s.codex.turn_timeout_ms == 3_600_000
    assert s.codex.read_timeout_ms == 5_000
    assert s.codex.stall_timeout_ms == 300_000
    assert s.tracker.api_key is None


def test_empty_prompt_body_uses_the_default_prompt(write_workflow, issue) -> None:
    wf = load_workflow(write_workflow("---\ntracker:\n  kind: local\n---\n\n   \n"))
    assert wf.prompt_template == DEFAULT_PROMPT
    text = render_prompt(wf.prompt_template, issue, None)
    assert "ABC-1" in text and "Fix the flux capacitor" in text and "It sparks." in text


def test_tracker_api_key_literal_and_var_indirection(write_workflow) -> None:
    literal = write_workflow("---\ntracker:\n  kind: linear\n  api_key: lit-key-123\n---\n")
    assert load_workflow(literal, env={}).settings.tracker.api_key == "lit-key-123"
    var = write_workflow("---\ntracker:\n  kind: linear\n  api_key: $MY_KEY\n---\n", "B.md")
    assert load_workflow(var, env={"MY_KEY": "from-env-456"}).settings.tracker.api_key == (
        "from-env-456"
    )
    # An empty variable means missing (spec §5.3.1).
    assert load_workflow(var, env={"MY_KEY": ""}).settings.tracker.api_key is None


def test_linear_api_key_falls_back_to_canonical_env(write_workflow) -> None:
    path = write_workflow("---\ntracker:\n  kind: linear\n---\n")
    wf = load_workflow(path, env={"LINEAR_API_KEY": "canon-789"})
    assert wf.settings.tracker.api_key == "canon-789"


def test_loaded_api_key_is_registered_for_redaction(write_workflow) -> None:
    path = write_workflow("---\ntracker:\n  kind: linear\n  api_key: $K\n---\n")
    load_workflow(path, env={"K": "zz-unique-secret-value-31337"})
    assert "zz-unique-secret-value-31337" not in redact("key is zz-unique-secret-value-31337")


def test_var_resolution_works_for_path_values(write_workflow, tmp_path: Path) -> None:
    path = write_workflow(
        "---\ntracker:\n  kind: local\n  path: $ISSUES\nworkspace:\n  root: $WS\n---\n"
    )
    env = {"ISSUES": str(tmp_path / "i.yaml"), "WS": str(tmp_path / "ws")}
    s = load_workflow(path, env=env).settings
    assert s.tracker.path == str((tmp_path / "i.yaml").resolve())
    assert s.workspace.root == str((tmp_path / "ws").resolve())


def test_relative_paths_resolve_against_the_workflow_folder(write_workflow, tmp_path) -> None:
    path = write_workflow("---\ntracker:\n  kind: local\n  path: issues.yaml\n---\n")
    assert load_workflow(path).settings.tracker.path == str((tmp_path / "issues.yaml").resolve())


def test_tilde_path_expansion_works(write_workflow) -> None:
    path = write_workflow("---\nworkspace:\n  root: ~/symphony-ws-test\n---\n")
    root = load_workflow(path).settings.workspace.root
    assert root == str(Path(os.path.expanduser("~/symphony-ws-test")).resolve())
    assert "~" not in root


def test_codex_command_is_preserved_as_a_shell_command_string(write_workflow) -> None:
    cmd = "codex --config x='$HOME/~y' app-server \"${CODEX_HOME:-$HOME/.codex}\" | tee log"
    path = write_workflow(f"---\ncodex:\n  command: |-\n    {cmd}\n---\n")
    assert load_workflow(path, env={}).settings.codex.command == cmd


def test_per_state_concurrency_map_normalizes_names_and_ignores_invalid(write_workflow) -> None:
    path = write_workflow(
        "---\nagent:\n  max_concurrent_agents_by_state:\n"
        "    ' In Progress ': 2\n    Todo: 0\n    Rework: -1\n    Merging: many\n"
        "    Review: 3\n---\n"
    )
    agent = load_workflow(path).settings.agent
    assert agent.max_concurrent_agents_by_state == {"in progress": 2, "review": 3}
    assert agent.limit_for_state("IN PROGRESS") == 2
    assert agent.limit_for_state("todo") is None


def test_states_accept_a_comma_separated_string(write_workflow) -> None:
    path = write_workflow("---\ntracker:\n  active_states: 'Todo, Doing'\n---\n")
    assert load_workflow(path).settings.tracker.active_states == ("Todo", "Doing")


def test_unknown_keys_are_ignored(write_workflow) -> None:
    path = write_workflow("---\nfuture_block:\n  x: 1\ntracker:\n  kind: local\n  frob: 2\n---\n")
    wf = load_workflow(path)
    assert wf.raw["future_block"] == {"x": 1}
    assert wf.settings.tracker.kind == "local"


def test_template_parse_error_surfaces_at_load(write_workflow) -> None:
    path = write_workflow("---\n---\nHello {% if issue.title %} unterminated\n")
    with pytest.raises(WorkflowError) as info:
        load_workflow(path)
    assert info.value.code == "template_parse_error"


def test_unknown_filter_surfaces_at_load(write_workflow) -> None:
    path = write_workflow("---\n---\nHello\n{{ issue.title | shout }}\n")
    with pytest.raises(WorkflowError) as info:
        load_workflow(path)
    assert info.value.code == "template_parse_error"
    assert "shout" in info.value.message and "(line 4)" in info.value.message  # the file's


def test_unknown_variable_fails_the_load_naming_the_file_line(write_workflow) -> None:
    # strict Liquid, rendered for a sample issue at load: not a failure of every run later
    path = write_workflow(
        "---\ntracker:\n  kind: local\n---\n\nHi {{ issue.title }}\n\n{{ issue.nosuchfield }}\n"
    )
    with pytest.raises(WorkflowError) as info:
        load_workflow(path)
    assert info.value.code == "template_render_error"
    assert "issue.nosuchfield is undefined" in info.value.message
    assert "(line 8)" in info.value.message


def test_a_template_using_every_issue_field_loads(write_workflow) -> None:
    body = (
        "{{ issue.id }} {{ issue.identifier }} {{ issue.title }} {{ issue.description }} "
        "{{ issue.priority }} {{ issue.state }} {{ issue.branch_name }} {{ issue.url }} "
        "{% for l in issue.labels %}{{ l }}{% endfor %} "
        "{% for b in issue.blocked_by %}{{ b.identifier }} {{ b.state }}{% endfor %} "
        "{{ issue.created_at }} {{ issue.updated_at }} {% if attempt %}retry {{ attempt }}{% endif %}"
    )
    assert load_workflow(write_workflow(f"---\n---\n{body}\n")).prompt_first_line == 3


def test_fingerprint_is_the_content_hash(write_workflow) -> None:
    a = load_workflow(write_workflow("---\n---\nA\n", "a.md"))
    b = load_workflow(write_workflow("---\n---\nA\n", "b.md"))
    c = load_workflow(write_workflow("---\n---\nB\n", "c.md"))
    assert a.fingerprint == b.fingerprint != c.fingerprint


def test_reference_implementation_workflow_loads_unchanged(tmp_path: Path, issue) -> None:
    path = tmp_path / "WORKFLOW.md"
    shutil.copy(FIXTURES / "reference_workflow.md", path)
    wf = load_workflow(path, env={"LINEAR_API_KEY": "k"})
    s = wf.settings
    assert s.tracker.kind == "linear"
    assert s.tracker.project_slug == "example-project-0a1b2c3d4e5f"
    assert s.tracker.assignee == "me"
    assert s.tracker.active_states == ("Todo", "In Progress", "Merging", "Rework")
    assert s.polling.interval_ms == 5000
    assert s.workspace.root == str(Path(os.path.expanduser("~/.codex/worktrees/example")))
    assert s.hooks.timeout_ms == 900_000
    assert s.hooks.after_create is not None and "worktree add" in s.hooks.after_create
    assert s.hooks.after_create.count("\n") >= 3
    assert s.hooks.before_remove is not None
    assert s.agent.max_concurrent_agents == 4 and s.agent.max_turns == 12
    assert s.codex.command.startswith("codex app-server proxy --sock ")
    assert "${CODEX_HOME:-$HOME/.codex}" in s.codex.command
    assert s.codex.model == "gpt-5.5"
    assert s.codex.approval_policy == "never"
    assert s.codex.thread_sandbox == "danger-full-access"
    assert s.codex.turn_sandbox_policy == {"type": "dangerFullAccess"}
    assert s.codex.read_timeout_ms == 60_000
    assert s.server.port == 4000 and s.server.host == "127.0.0.1"
    assert wf.raw["codex"]["reasoning_effort"] == "xhigh"
    assert wf.raw["observability"]["refresh_ms"] == 1000
    text = render_prompt(wf.prompt_template, issue, None)
    assert "Ticket `ABC-1` is yours." in text
    assert "Labels: bug, easy" in text
    assert "attempt #" not in text
    assert "Blocked by ABC-0 (Done)" in text
    assert "attempt #3;" in render_prompt(wf.prompt_template, issue, 3)


def test_approval_policy_may_be_a_map(tmp_path: Path) -> None:
    path = tmp_path / "WORKFLOW.md"
    shutil.copy(FIXTURES / "approval_policy_map.md", path)
    policy = load_workflow(path, env={}).settings.codex.approval_policy
    assert policy == {"reject": {"sandbox_approval": True, "rules": True, "mcp_elicitations": True}}


def test_github_priority_labels_refuse_booleans(write_workflow) -> None:
    path = write_workflow(
        "---\ntracker:\n  kind: github\n  repo: o/r\n  token: t\n"
        "  priority_labels: {p0: true, p1: 2}\n---\n"
    )
    with pytest.raises(WorkflowError) as info:
        load_workflow(path)
    assert info.value.code == "invalid_settings"
    assert "tracker.priority_labels.p0: Input should be a whole number, not true" in str(info.value)
