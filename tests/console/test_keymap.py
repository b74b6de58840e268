from pathlib import Path

from symphony_tui.console.keymap import default_keymap_path, load_keymap
from symphony_tui.console.registry import APP_BY_ACTION, BY_ID, COMMANDS, bindings_for


def test_missing_file_is_empty_without_error(tmp_path: Path):
    loaded = load_keymap(tmp_path / "nope.toml")
    assert loaded.keymap == {} and loaded.errors == ()
    assert load_keymap(None).keymap == {}


def test_toml_keymap(tmp_path: Path):
    path = tmp_path / "keymap.toml"
    path.write_text('interrupt = "x"\nquit = "ctrl+q, Q"\n')
    loaded = load_keymap(path)
    assert loaded.keymap == {"interrupt": "x", "quit": "ctrl+q,Q"}
    assert loaded.errors == ()


def test_json_keymap_and_keymap_table(tmp_path: Path):
    path = tmp_path / "keymap.json"
    path.write_text('{"keymap": {"approve": "y"}}')
    assert load_keymap(path).keymap == {"approve": "y"}


def test_bad_entries_reported_not_raised(tmp_path: Path):
    path = tmp_path / "keymap.toml"
    path.write_text('nonsense = "z"\nstop = 3\nrerun = "e"\n')
    loaded = load_keymap(path)
    assert loaded.keymap == {"rerun": "e"}
    assert len(loaded.errors) == 2
    assert any("nonsense" in e for e in loaded.errors)
    assert all("\n" not in e for e in loaded.errors)


def test_syntax_error_is_one_line(tmp_path: Path):
    path = tmp_path / "keymap.toml"
    path.write_text("interrupt = \n[[[")
    loaded = load_keymap(path)
    assert loaded.keymap == {} and len(loaded.errors) == 1
    assert "\n" not in loaded.errors[0]


def test_default_path_is_under_user_config():
    path = default_keymap_path()
    assert path.name == "keymap.toml" and "symphony-tui" in str(path)


def test_registry_ids_unique_and_bindings_carry_ids():
    assert len(BY_ID) == len(COMMANDS)
    for scope in ("app", "main", "worker", "approvals", "recovered"):
        for binding in bindings_for(scope):
            assert binding.id in BY_ID
            assert binding.tooltip
    assert {"interrupt", "approve", "deny", "rerun", "stop", "quit"} <= set(APP_BY_ACTION)
