"""The core (everything outside symphony_tui.console) never loads textual, and never
imports rich itself (after harlequin, which proves the same of its core). Each module is
imported in a fresh interpreter.

Why rich is judged by importer: ``import httpx`` loads ``rich.console`` on its own when
rich is installed (``httpx._main``, its CLI), and rich is installed because textual
depends on it. So the check is: textual never appears in ``sys.modules``, and no
``symphony_tui`` module is the importer of any ``rich`` / ``textual`` module.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import symphony_tui

CHECK = """
import builtins, importlib, sys
_real_import = builtins.__import__
culprits = set()

def _import(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {{}}).get('__name__') or ''
    if level == 0 and name.split('.')[0] in ('textual', 'rich'):
        if importer.split('.')[0] == 'symphony_tui':
            culprits.add(importer + ' -> ' + name)
    return _real_import(name, globals, locals, fromlist, level)

builtins.__import__ = _import
importlib.import_module({name!r})
if any(m.split('.')[0] == 'textual' for m in sys.modules):
    culprits.add('textual loaded')
print(';'.join(sorted(culprits)))
"""


def core_modules() -> list[str]:
    names = ["symphony_tui"]
    for info in pkgutil.walk_packages(symphony_tui.__path__, "symphony_tui."):
        if info.name == "symphony_tui.console" or info.name.startswith("symphony_tui.console."):
            continue
        names.append(info.name)
    return names


def test_there_are_core_modules_to_check():
    modules = core_modules()
    assert "symphony_tui.domain" in modules
    assert "symphony_tui.scheduler.port" in modules
    assert not any(m.startswith("symphony_tui.console") for m in modules)


def test_core_modules_never_import_textual_or_rich():
    # one interpreter per module: a module that imports textual must not hide behind
    # another that happened to load it first
    offenders = {}
    names = core_modules()
    for start in range(0, len(names), 4):  # a few at a time: the machine is shared
        batch = {
            name: subprocess.Popen(
                [sys.executable, "-c", CHECK.format(name=name)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name in names[start : start + 4]
        }
        for name, proc in batch.items():
            out, err = proc.communicate(timeout=120)
            if proc.returncode != 0:
                # a module that cannot be imported on its own is a failure too
                offenders[name] = err.strip().splitlines()[-1:]
            elif out.strip():
                offenders[name] = out.strip()
    assert offenders == {}


def test_the_check_catches_a_direct_import(tmp_path):
    # guard against a check that cannot fail: a symphony_tui module importing rich
    pkg = tmp_path / "symphony_tui_probe"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "bad.py").write_text("import rich.text\n")
    code = CHECK.format(name="symphony_tui_probe.bad").replace(
        "importer.split('.')[0] == 'symphony_tui'", "importer.startswith('symphony_tui')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert "symphony_tui_probe.bad -> rich.text" in proc.stdout
