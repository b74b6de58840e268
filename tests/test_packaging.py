"""The two distributions of the checkout: ``symphony-tui`` (the runtime, ``symphony_tui``) and
``symphony-tui-testing`` (its test fakes, ``symphony_tui_testing`` in ``testing/src``).

The fakes use the runtime's own types, so both carry one version and the fakes pin that
release; the testing distribution builds its wheel and sdist from its own folder, so nothing
its build reads may lie outside ``testing/``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import symphony_tui
import symphony_tui_testing

ROOT = Path(__file__).resolve().parents[1]
TESTING = ROOT / "testing"


def _project(folder: Path) -> dict:
    return tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))


def _inside(folder: Path, relative: str) -> bool:
    return (folder / relative).resolve().is_relative_to(folder.resolve())


def test_the_fakes_carry_the_runtime_version_and_pin_that_release():
    assert symphony_tui_testing.__version__ == symphony_tui.__version__
    requires = _project(TESTING)["project"]["dependencies"]
    assert f"symphony-tui=={symphony_tui.__version__}" in requires


def test_the_testing_distribution_builds_from_its_own_folder_only():
    hatch = _project(TESTING)["tool"]["hatch"]
    version_file = hatch["version"]["path"]
    assert _inside(TESTING, version_file) and (TESTING / version_file).is_file()
    wheel = hatch["build"]["targets"]["wheel"]
    assert "force-include" not in wheel and not wheel.get("bypass-selection", False)
    assert wheel["packages"] == ["src/symphony_tui_testing"]
    for path in [*wheel["packages"], *hatch["build"]["targets"]["sdist"]["include"]]:
        assert _inside(TESTING, path) and (TESTING / path).exists(), path


def test_the_runtime_package_holds_no_fakes():
    package = ROOT / "symphony_tui"
    assert not (package / "testing").exists()
    assert not any(package.rglob("fake_*.py"))
    wheel = _project(ROOT)["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert wheel["packages"] == ["symphony_tui"] and "exclude" not in wheel
