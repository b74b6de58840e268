"""The built-in demo: a simulated coding agent speaking the codex app-server protocol.

``python -m symphony_tui.demo.agent`` is a small, real program (no network; stdlib only on
stdio, ``websockets`` for its ``--listen unix://PATH`` mode) that the scheduler launches
through its codex backend exactly like ``codex app-server``, on stdio or detached on a unix
socket (``codex.transport: unix``). It reads ``[demo: ...]`` directives from the turn
prompt (:mod:`~symphony_tui.demo.directives`), really runs commands and writes files in the
workspace, asks for approvals and moves its issue with the ``symphony_set_issue_state`` tool. The demo workflow and issues live in ``assets/demo``,
which ``symphony-tui demo`` copies to a fresh temporary folder.
"""
