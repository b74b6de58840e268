"""The console's modules form no import circle, type-only imports included:
screens post typed messages (``console.messages``) instead of importing the app."""

from __future__ import annotations

import grimp

CONSOLE = "symphony_tui.console"


def test_no_import_circle_in_the_console():
    graph = grimp.build_graph("symphony_tui")  # counts TYPE_CHECKING imports too
    modules = {m for m in graph.find_descendants(CONSOLE)}
    circles = []
    for module in sorted(modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module) & modules):
            if graph.chain_exists(importer=imported, imported=module):
                circles.append(f"{module} <-> {imported}")
    assert circles == []


def test_screens_do_not_import_the_app():
    graph = grimp.build_graph("symphony_tui")
    importers = graph.find_modules_that_directly_import(f"{CONSOLE}.app")
    assert not {m for m in importers if m.startswith(f"{CONSOLE}.")}
