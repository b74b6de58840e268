# PYTHON_ARGCOMPLETE_OK
"""``symphony-tui`` command line (spec §17.7).

    symphony-tui [run] [WORKFLOW] [--headless [--exit-when-idle]] [--port N] [--no-lock]
    symphony-tui demo [--headless [--exit-when-idle]] [--keep] | demo --copy-to DIR
    symphony-tui doctor [WORKFLOW] [--timeout S]
    symphony-tui attach URL | ssh://[user@]host[:port] | --ssh [user@]host
    symphony-tui fleet [TARGET...] [--token-env VAR | --token-file PATH] [--list]
    symphony-tui paths [WORKFLOW] [--json]
    symphony-tui ps [--json]
    symphony-tui stop [WORKFLOW | PROJECT] [--timeout S]

``run`` is the default command: ``symphony-tui WORKFLOW.md`` is ``symphony-tui run
WORKFLOW.md``, and a command name written after options (``--headless demo``) is still that
command. Tab completion comes from ``argcomplete`` when it is installed (the ``completion``
extra): ``eval "$(register-python-argcomplete symphony-tui)"``.

Exit codes: 0 normal quit (or idle exit), 1 start-up failure, 2 usage error, 130 Ctrl-C
during start-up (before the console or headless mode handles it).
Errors are printed as one line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from symphony_tui import __version__

if TYPE_CHECKING:
    from symphony_tui.console.typeahead import HeldKeys

COMMANDS = ("run", "demo", "doctor", "attach", "fleet", "paths", "stats", "ps", "stop")


def _fail(message: str, code: int = 1) -> int:
    print(f"symphony-tui: {message}", file=sys.stderr)
    return code


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose usage errors are one line on stderr (exit 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port number (0-65535)")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return value


def _scheduler_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--headless", action="store_true", help="run without the console")
    parser.add_argument(
        "--exit-when-idle",
        action="store_true",
        help="(headless) exit 0 once nothing is running, retrying or eligible; print state JSON",
    )
    parser.add_argument(
        "--port",
        type=_port,
        default=None,
        help="serve the HTTP API on this port, 0 for any free one (beats server.port)",
    )
    _log_options(parser)


def _log_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-dir",
        type=Path,
        default=None,
        help="folder for this scheduler's symphony.log (see `paths`)",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
    )


def _workflow_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "workflow",
        nargs="?",
        default=None,
        help="path to WORKFLOW.md, or the folder holding it (default ./WORKFLOW.md)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: one subparser per command, each with its own ``--help``."""
    from symphony_tui.cli_help import COMMAND_HELP, MAIN_DESCRIPTION, main_epilog

    p = _Parser(
        prog="symphony-tui",
        description="\n".join(textwrap.fill(line, 88) for line in MAIN_DESCRIPTION.splitlines()),
        epilog=main_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"symphony-tui {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", title="commands")

    def command(name: str) -> argparse.ArgumentParser:
        summary, description, epilog = COMMAND_HELP[name]
        parser = sub.add_parser(
            name,
            help=summary,
            description=textwrap.fill(description, 88),
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        parser.set_defaults(command_parser=parser)  # its own errors name it
        return parser

    run = command("run")
    _workflow_argument(run)
    run.add_argument(
        "--no-lock", action="store_true", help="skip the one-scheduler-per-project lock"
    )
    _scheduler_options(run)

    demo = command("demo")
    _scheduler_options(demo)
    demo.add_argument(
        "--keep",
        action="store_true",
        help="keep the demo's temporary folder (workspaces, event history) after exit",
    )
    demo.add_argument(
        "--copy-to",
        metavar="DIR",
        type=Path,
        help="write the demo project (WORKFLOW.md, issues.yaml, README.md) into DIR and exit, "
        "to run it as your own: `symphony-tui DIR/WORKFLOW.md` detaches, attaches, and joins "
        "a fleet; refused when DIR has one of those files",
    )

    doctor = command("doctor")
    _workflow_argument(doctor)
    doctor.add_argument(
        "--timeout",
        type=_seconds,
        default=None,
        help="seconds each agent or tracker check may take (default: 20 for the agent, "
        "35 for the tracker)",
    )

    attach = command("attach")
    attach.add_argument(
        "url", nargs="?", help="the API (http://127.0.0.1:8080) or ssh://[user@]host[:port]"
    )
    attach.add_argument("--ssh", metavar="[USER@]HOST", help="forward to HOST's API through ssh")
    attach.add_argument("--api-port", type=_port, help="(ssh) the API port, if several run there")
    attach.add_argument(
        "--token-env",
        default="SYMPHONY_API_TOKEN",
        help="environment variable holding the API token (default SYMPHONY_API_TOKEN)",
    )
    attach.add_argument("--poll", action="store_true", help="poll instead of the event stream")

    fleet = command("fleet")
    fleet.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        help="WORKFLOW.md (or its folder), http(s)://HOST:PORT, ssh://[user@]host[:port] or "
        "local (default: local and the fleet file)",
    )
    token = fleet.add_mutually_exclusive_group()
    token.add_argument(
        "--token-env",
        metavar="VAR",
        help="variable holding the API token, for a scheduler that needs one its API note "
        "does not offer (default SYMPHONY_API_TOKEN)",
    )
    token.add_argument("--token-file", type=Path, metavar="PATH", help="a 0600 file with it")
    fleet.add_argument(
        "--list",
        action="store_true",
        help="print each project's state once (after --wait) instead of opening the console; "
        "exit 1 when any project is not live",
    )
    fleet.add_argument(
        "--wait", type=_seconds, default=5.0, help="(--list) seconds to let them connect"
    )

    paths = command("paths")
    _workflow_argument(paths)
    paths.add_argument("--json", action="store_true", help="print one JSON object")
    paths.add_argument("--log-dir", type=Path, default=None, help="as given to `run`")

    stats = command("stats")
    _workflow_argument(stats)
    stats.add_argument(
        "--since", default="7d", help="the period: 7d, 24h, 30m, 2w, a date, or all (default 7d)"
    )
    stats.add_argument("--json", action="store_true", help="print one JSON object")

    ps = command("ps")
    ps.add_argument("--json", action="store_true", help="print one JSON object a line")

    stop = command("stop")
    stop.add_argument(
        "target",
        nargs="?",
        default=None,
        help="a WORKFLOW.md (or the folder holding it), a project as `ps` shows it, its "
        "folder's name, or a pid (default ./WORKFLOW.md); never a piece of a name",
    )
    stop.add_argument(
        "--timeout",
        type=_seconds,
        default=None,
        help="seconds to wait for the scheduler to end (default: the hooks' grace + 60)",
    )
    return p


def _valued_options(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string (of any command) that takes a value: its next word is no command."""
    found: set[str] = set()
    parsers = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            parsers.extend(action.choices.values())
    for each in parsers:
        for action in each._actions:
            if action.option_strings and action.nargs != 0:
                found.update(action.option_strings)
    return found


def normalize_argv(argv: Sequence[str], parser: argparse.ArgumentParser) -> list[str]:
    """``argv`` with its command first: the first word that is not an option (or an
    option's value) names the command when it is one (moved to the front), else ``run`` is
    put first. ``--help`` and ``--version`` alone stay the main parser's."""
    words = list(argv)
    if not words or words[0] in ("-h", "--help", "--version"):
        return words or ["run"]
    valued = _valued_options(parser)
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            break
        if word.startswith("-") and word != "-":
            i += 2 if word in valued else 1
            continue
        if word in COMMANDS:
            return [word, *words[:i], *words[i + 1 :]]
        break
    return ["run", *words]


#: The keys the console holds from the start of :func:`main` (``console/typeahead.py``):
#: set there, handed to the console, released on return (and at once for the commands
#: that paint no console).
_held: HeldKeys | None = None


def _modes_before() -> list | None:
    """The terminal's modes from before :func:`main` held the keys, for the console to
    hand Textual; None when nothing is held (not a terminal, or main not the caller)."""
    return _held.before() if _held is not None else None


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module docstring); returns the exit code. Echo and line
    input are off while it runs in a terminal (type-ahead for the console, whose imports
    take most of a second), and back as they were when it returns."""
    global _held
    from symphony_tui.console.typeahead import HeldKeys

    _held = HeldKeys()
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C before the console (or headless mode) took it
        print("symphony-tui: interrupted", file=sys.stderr)
        return 130
    finally:
        _held.release()
        _held = None


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    if "_ARGCOMPLETE" in os.environ:  # a shell asks for completions: answer and exit
        try:
            import argcomplete
        except ImportError:
            pass
        else:
            argcomplete.autocomplete(parser)
    args, extra = parser.parse_known_args(
        normalize_argv(sys.argv[1:] if argv is None else argv, parser)
    )
    if extra:
        getattr(args, "command_parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    # The Python running this is one that has symphony_tui: agent commands and hooks that
    # name "${SYMPHONY_PYTHON:-python3}" (the demo agent) get it, whatever a login shell's
    # PATH puts first. An operator's own setting wins.
    os.environ.setdefault("SYMPHONY_PYTHON", sys.executable)
    no_console = args.command in ("doctor", "paths", "stats", "ps", "stop") or getattr(
        args, "headless", False
    )
    no_console = no_console or (args.command == "fleet" and args.list)
    if no_console and _held is not None:
        _held.release()  # no console: the terminal as it was (prompts, Ctrl-C)
    if args.command == "demo":
        return _demo(args)
    if args.command == "attach":
        if not args.url and not args.ssh:
            args.command_parser.error("the following arguments are required: url (or --ssh HOST)")
        if args.url and args.ssh:
            args.command_parser.error("give a URL or --ssh HOST, not both")
        return _attach(args)
    if args.command == "fleet":
        return _fleet(args)
    if args.command == "doctor":
        from symphony_tui.doctor import run_doctor

        return run_doctor(args.workflow, timeout=args.timeout)
    if args.command in ("ps", "stop"):
        from symphony_tui import schedulers_command

        if args.command == "ps":
            return schedulers_command.run_ps(as_json=args.json)
        return schedulers_command.run_stop(args.target, timeout=args.timeout)
    if args.command == "paths":
        from symphony_tui.paths_command import run_paths

        return run_paths(args.workflow, as_json=args.json, log_dir=args.log_dir)
    if args.command == "stats":
        from symphony_tui.stats_command import run_stats

        return run_stats(args.workflow, since=args.since, as_json=args.json)
    problem = _console_problem(args)
    if problem:
        return _fail(problem)
    from symphony_tui.paths import resolve_workflow_path

    path = resolve_workflow_path(args.workflow)
    if path.is_dir():  # a folder's WORKFLOW.md that is itself a folder
        return _fail(f"missing_workflow_file: {path} is a folder, not a workflow file")
    if not path.is_file():
        return _fail(f"missing_workflow_file: {path} does not exist{_command_hint(args.workflow)}")
    return _run(path, args, lock=not args.no_lock, detachable=not args.no_lock)


def _command_hint(word: str | None) -> str:
    """``; did you mean `symphony-tui doctor`?`` when a missing workflow path looks like a
    mistyped command (a bare word close to one), else ``""``."""
    import difflib

    if not word or "/" in word or "." in word:
        return ""
    close = difflib.get_close_matches(word, COMMANDS, n=1, cutoff=0.6)
    return f"; did you mean `symphony-tui {close[0]}`?" if close else ""


def _run(
    path: Path,
    args: argparse.Namespace,
    *,
    lock: bool = True,
    title: str = "symphony",
    events_path: Path | None = None,
    detachable: bool = False,
) -> int:
    """Start the scheduler (headless or under the console) and run it to the end
    (``detachable``: the console's scheduler may outlive it, :mod:`symphony_tui.detach`). The
    garbage collector is off during start-up (imports and set-up allocate a great deal and
    free almost nothing, so its passes are wasted: about a tenth of the launch's CPU) until
    :func:`_freeze_startup_heap`, and back on in any case when this returns."""
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        return _start(
            path, args, lock=lock, title=title, events_path=events_path, detachable=detachable
        )
    finally:
        if enabled:
            gc.enable()


def _start(
    path: Path,
    args: argparse.Namespace,
    *,
    lock: bool,
    title: str,
    events_path: Path | None,
    detachable: bool = False,
) -> int:
    from symphony_tui.observability.logs import configure_logging
    from symphony_tui.paths import log_file as log_file_of

    try:
        # every scheduler of a user logs to one folder by default, each to a file of its
        # own (its workflow's); each line also says whose
        context = {"pid": os.getpid(), "project": path.resolve().parent.name}
        target = log_file_of(path, args.log_dir)
        log_file = configure_logging(target.parent, args.log_level, context, file_name=target.name)
    except OSError as exc:
        return _fail(f"cannot write logs to {args.log_dir or 'the log folder'}: {exc}")
    if not args.headless:
        return _console(
            path,
            args,
            lock=lock,
            title=title,
            events_path=events_path,
            log=log_file,
            detachable=detachable,
        )
    from symphony_tui.scheduler.orchestrator import StartupError

    try:
        runtime, api = _build(path, args, lock=lock, events_path=events_path, say=_say)
    except _BuildFailed as exc:
        return _fail(str(exc))
    print(f"symphony-tui: running {path} headless; log: {log_file}", file=sys.stderr)
    for warning in runtime.store.current.warnings:
        print(f"symphony-tui: warning: {warning}", file=sys.stderr)
    _freeze_startup_heap()
    try:
        import asyncio

        return asyncio.run(_headless(runtime, args.exit_when_idle, api, path))
    except StartupError as exc:
        return _fail(f"startup failed: {exc}")
    except OSError as exc:
        return _fail(f"cannot start the HTTP API: {exc}")
    except Exception as exc:  # the host failed abnormally: one line, non-zero (§17.7)
        return _fail(f"scheduler failed: {type(exc).__name__}: {exc}; log: {log_file}")


class _BuildFailed(Exception):
    """The scheduler could not be built; ``str()`` is the one-line message (no prefix)."""


class _AlreadyRunning(_BuildFailed):
    """Another scheduler holds the project's lock; ``owner`` is its recorded note, ``path``
    the lock file (None: not known)."""

    def __init__(self, message: str, owner: dict, path: Path | None = None) -> None:
        super().__init__(message)
        self.owner = owner
        self.path = path


def _say(line: str) -> None:
    # (after a hang-up the terminal is gone: writing to it fails with EIO)
    with contextlib.suppress(OSError, ValueError):
        print(f"symphony-tui: {line}", file=sys.stderr, flush=True)


def _build(
    path: Path,
    args: argparse.Namespace,
    *,
    lock: bool,
    events_path: Path | None,
    say: Callable[[str], None],
    serve: bool = False,
):
    """Load the workflow, build the runtime (``build_runtime``) and the HTTP API it asks
    for (``serve``: always, on loopback when none is configured, for a second console to
    attach); returns ``(runtime, api or None)``. A held project lock raises
    :class:`_AlreadyRunning`. Every start-up failure (bad WORKFLOW.md, failed
    dispatch validation, a held project lock, an unknown tracker, a bad API token, the lock
    folder or event file not creatable) raises :class:`_BuildFailed` with the one line the
    operator is shown, nothing left held. ``say`` gets one-off lines (a generated token)."""
    from symphony_tui.api.auth import TokenError
    from symphony_tui.config.errors import WorkflowError
    from symphony_tui.runtime import build_runtime
    from symphony_tui.scheduler.orchestrator import StartupError
    from symphony_tui.scheduler.project_lock import ProjectLockedError
    from symphony_tui.trackers.base import TrackerError

    try:
        runtime = build_runtime(path, lock=lock, events_path=events_path, freeze_heap=True)
    except StartupError as exc:
        raise _BuildFailed(f"startup failed: {exc}") from None
    except ProjectLockedError as exc:
        raise _AlreadyRunning(str(exc), exc.owner, exc.path) from None
    except (WorkflowError, TrackerError) as exc:
        raise _BuildFailed(str(exc)) from None
    except OSError as exc:  # the lock folder or the event file cannot be created
        raise _BuildFailed(f"startup failed: {exc}") from None
    # A ``stop_scheduler`` command (an attached console's "Stop N agents") takes the path
    # of ``symphony-tui stop``: SIGTERM to this process, whose handler (console, detached
    # or headless) stops the workers with the hooks' grace.
    runtime.orchestrator.on_stop_command(_terminate_self)
    try:
        api = _api_server(
            runtime, getattr(args, "port", None), announce=True, say=say, serve=serve, path=path
        )
    except (TokenError, OSError) as exc:
        import asyncio

        asyncio.run(runtime.close())
        raise _BuildFailed(str(exc)) from None
    return runtime, api


def _terminate_self(by: str) -> None:
    """A ``stop_scheduler`` command from ``by``: SIGTERM to this process, which then says
    the command stopped it (``schedulers_command.stop_reason``)."""
    import signal

    from symphony_tui.schedulers_command import stop_command_from

    stop_command_from(by)
    os.kill(os.getpid(), signal.SIGTERM)


def _console(
    path: Path,
    args: argparse.Namespace,
    *,
    lock: bool,
    title: str,
    events_path: Path | None,
    log: Path,
    detachable: bool = False,
) -> int:
    """The console: its first frame is painted first, then the scheduler is built in a
    thread (imports and all, so launch to first frame stays short) and its panes fill in
    (``console.starting``). A failed build closes the console and prints the same one line
    as a failure before the console starts, exit 1. The keys typed meanwhile are held by
    :func:`main` (``console/typeahead.py``); the app gets the terminal's modes from before
    the hold.

    ``detachable`` (``symphony-tui WORKFLOW.md``): the process forks first
    (:mod:`symphony_tui.detach`); the scheduler always serves its API on loopback, may run
    on headless after the console left, and when the project's scheduler already runs the
    console attaches to it instead (found through its lock and the user's API notes)."""
    import asyncio

    holder = None
    if detachable:
        from symphony_tui.detach import hold_terminal

        held = hold_terminal()
        if isinstance(held, int):
            return held  # the holder: the console detached (0) or ended with this code
        holder = held

    from symphony_tui.console.app import SymphonyApp
    from symphony_tui.console.starting import Started, StartFailed

    built: list = []  # (runtime, api) once built, for the cleanup below
    said: list[str] = []  # one-off lines (a generated API token): shown, and kept for exit
    serving: list[asyncio.Future] = []  # the scheduler's own task (outlives the app)
    attachments: list = []

    async def start() -> Started:
        try:
            runtime, api = await asyncio.to_thread(
                _build,
                path,
                args,
                lock=lock,
                events_path=events_path,
                say=said.append,
                serve=detachable,
            )
        except _AlreadyRunning as exc:
            if not detachable:
                raise StartFailed(str(exc)) from None
            from symphony_tui.observability.logs import leave_rotation

            leave_rotation()  # the log file is that scheduler's: it alone rotates it
            _freeze_startup_heap()  # the collector back on: this console may run for days
            return await _attach_to_running(exc, attachments, path)
        except _BuildFailed as exc:
            raise StartFailed(str(exc)) from None
        built.append((runtime, api))
        _freeze_startup_heap()

        async def serve() -> None:
            if api is not None:
                await api.start()
                if detachable and runtime.lock is not None:
                    runtime.lock.note(api=api.url, token_file=api.announce_extra.get("token_file"))
            await runtime.orchestrator.run()

        async def runner() -> None:
            # The scheduler is this process's task, not the app's worker: when the console
            # detaches, the app's workers are cancelled and the scheduler goes on.
            if not serving:
                serving.append(asyncio.ensure_future(serve()))
            await asyncio.shield(serving[0])

        async def shutdown() -> None:
            reason = _console_stop_reason(app.stop_cause)
            if api is not None:
                await api.stop(ending=reason)
            await runtime.close(reason)

        return Started(
            runtime.orchestrator,
            runner=runner,
            shutdown=shutdown,
            notices=runtime.store.current.warnings,
            messages=[("HTTP API", line) for line in said],
        )

    app = SymphonyApp(
        start=start,
        title=title,
        terminal_modes=_modes_before(),
        detachable=holder is not None,
    )

    async def main() -> int | None:
        await app.run_async()
        reason = app.detached
        if reason is None and app.failed is not None and holder is not None:
            # a fault of the console is not the scheduler's: it runs on, as after a hang-up
            reason = CONSOLE_FAILED
        if reason is None or not built or not serving or serving[0].done():
            return None
        runtime, api = built[0]
        return await _run_on_detached(reason, runtime, api, serving[0], holder, log, path)

    code: object = None
    try:
        code = asyncio.run(main())
    finally:
        # The app awaits shutdown on every exit it controls. If Textual itself died first,
        # its event loop (and the workers' tasks) are gone, but the agents' processes are
        # not: end their process groups so nothing outlives us.
        for runtime, _api in built:
            if not runtime.orchestrator.stopped:
                runtime.orchestrator.kill_agents_now()
                if runtime.lock is not None:
                    runtime.lock.release()
            if app.detached is None:  # the terminal is restored
                for line in runtime.orchestrator.hooks_cut_short:
                    _say(line)
        if app.detached is None:
            for line in said:  # printed before the console, before: still in the scrollback
                _say(line)
        for attachment in attachments:
            attachment.close()
        if holder is not None:
            holder.close()
    if isinstance(code, int):
        return code
    if app.start_error is not None:
        return _fail(app.start_error)
    rc = app.return_code if app.return_code is not None else 0
    if rc:
        print(f"symphony-tui: exited with an error; log: {log}", file=sys.stderr)
    return rc


def _console_stop_reason(cause: str | None) -> str:
    """What stopped a console's scheduler, from the console's ``stop_cause`` (``q``, a
    signal's name, a lost terminal), one line for the stream's ``stopping`` frame and the
    log."""
    from symphony_tui.schedulers_command import stop_reason

    if cause == "q":
        return "stopped by the console's q"
    if cause is not None and cause.startswith("SIG"):
        return stop_reason(cause)
    return f"stopped with its console ({cause})" if cause else "stopped with its console"


def _since(started_at: object) -> str:
    """`` since 07:18`` (this machine's time; with the date when not today) for a note's
    ISO 8601 ``started_at``; ``""`` without a readable one."""
    from datetime import datetime

    try:
        at = datetime.fromisoformat(str(started_at)).astimezone()
    except ValueError:
        return ""
    now = datetime.now().astimezone()
    return f" since {at:%H:%M}" if at.date() == now.date() else f" since {at:%Y-%m-%d %H:%M}"


#: Seconds a console waits for a scheduler that is still starting (it holds the project's
#: lock, its API is not up yet) before it gives up attaching to it.
STARTING_OWNER_S = 30.0


async def _owner_note(found: _AlreadyRunning) -> tuple[object, dict | None]:
    """(the lock owner's pid, this user's API note of it) for a project whose scheduler
    runs. Two consoles started at once for one project: the one that took the lock is
    still building, its note (and, for a moment, the lock's own record) not written yet;
    this waits for them while the owner started less than :data:`STARTING_OWNER_S` ago
    and has not recorded its API in the lock. Raises ``StartFailed`` when the lock was
    given up meanwhile (that scheduler failed or stopped)."""
    import asyncio
    from datetime import UTC, datetime

    from symphony_tui.api import announce
    from symphony_tui.console.starting import StartFailed
    from symphony_tui.scheduler.project_lock import lock_owner

    owner: dict | None = found.owner
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STARTING_OWNER_S
    while True:
        if owner is None:
            raise StartFailed(f"{found}; it stopped before this console attached: start again")
        pid = owner.get("pid")
        note = announce.read_note(announce.default_dir(), pid) if isinstance(pid, int) else None
        if note is not None and (isinstance(note.get("port"), int) or "api" in owner):
            return pid, note
        try:
            started = datetime.fromisoformat(str(owner.get("started_at")))
            age = (datetime.now(UTC) - started).total_seconds()
        except (TypeError, ValueError):
            age = 0.0 if not owner else STARTING_OWNER_S  # a record not written yet
        starting = "api" not in owner and age < STARTING_OWNER_S
        if not starting or found.path is None or loop.time() > deadline:
            return pid, note
        await asyncio.sleep(0.1)
        try:
            owner = lock_owner(found.path)
        except OSError:
            return pid, note


async def _attach_to_running(found: _AlreadyRunning, attachments: list, path: Path):
    """The project's scheduler already runs (``found.owner``, its lock's note): attach to
    its API, found in this user's own note of that process (``api/announce.py``), with the
    token kept there, and follow it when it is started again (found again by its workflow,
    ``path``: ``api/follow.py``). Raises ``StartFailed`` (the ``project_locked`` line and
    why) when it cannot: another user's scheduler, one without an API, or one that does
    not answer."""
    from symphony_tui.api import announce
    from symphony_tui.api.attach import Attachment, _probe, env_token, workflow_finder
    from symphony_tui.api.auth import read_control_token
    from symphony_tui.api.client import RemoteError
    from symphony_tui.api.follow import FollowingPort
    from symphony_tui.console.starting import ATTACHED, Started, StartFailed

    pid, note = await _owner_note(found)
    if note is None or not isinstance(note.get("port"), int):
        raise StartFailed(f"{found} (it serves no API this user can attach to)")
    host = str(note.get("host") or "127.0.0.1")
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    url = f"http://{host}:{note['port']}"
    control_file = note.get("control_token_file")
    control = read_control_token(control_file) if isinstance(control_file, str) else None
    attachment = Attachment(
        url,
        announce.read_token(note) or env_token(),
        "stream",
        label=f"pid {pid} ({url})",
        control=control,
        owner=announce.Owner.of(announce.default_dir(), pid),
        pid=pid if isinstance(pid, int) else None,
        workflow=str(path.resolve()),
    )
    attachments.append(attachment)
    try:
        await _probe(attachment)
    except RemoteError as exc:
        raise StartFailed(f"{found}; attaching to it failed: {exc}") from None
    remote = FollowingPort(attachment, workflow_finder(str(path.resolve())))
    since = _since(note.get("started_at"))
    return Started(
        remote,
        runner=remote.run,
        shutdown=remote.close,
        messages=[
            (
                ATTACHED,
                f"this project's scheduler already runs (pid {pid}{since}): attached to it. "
                "q detaches or stops it; `symphony-tui stop` ends it.",
            )
        ],
    )


#: Why a console's scheduler runs on headless when the console itself failed (an unhandled
#: error in the UI): its agents are not the console's to end.
CONSOLE_FAILED = "the console failed"


async def _run_on_detached(reason, runtime, api, scheduler, holder, log: Path, path: Path) -> int:
    """The console left while its scheduler runs: say so (terminal and log), hand the
    terminal back (:meth:`symphony_tui.detach.TerminalHolder.release`), and run on headless
    until ``symphony-tui stop`` (SIGTERM) or SIGINT."""
    import logging

    from symphony_tui.headless import run_on_detached
    from symphony_tui.observability.logs import log_kv

    running = len(runtime.orchestrator.snapshot().running)
    where = api.url if api is not None else "no API"
    log_kv(
        logging.getLogger("symphony_tui"),
        "info",
        "console detached; the scheduler runs on headless",
        reason=reason,
        pid=os.getpid(),
        api=where,
        running=running,
    )
    if reason in ("q", CONSOLE_FAILED):
        said = "detached" if reason == "q" else "the console failed (above), not its scheduler"
        _say(
            f"{said}: the scheduler (pid {os.getpid()}, API {where}) keeps {running} "
            f"agent(s) running; `symphony-tui {path.name}` attaches, "
            f"`symphony-tui stop {path.name}` ends it; log: {log}"
        )
    if holder is not None:
        holder.release(log)

    async def stop_api(reason: str) -> None:
        if api is not None:
            await api.stop(ending=reason)

    return await run_on_detached(runtime, scheduler, stop_api)


def _freeze_startup_heap() -> None:
    """Move what start-up built (modules, schemas, settings: most of the heap before the
    first event) out of the garbage collector's reach with :func:`gc.freeze`, so a full
    collection scans only what the run creates (unfrozen, full pauses reach 477 ms).
    No collection first: over the console's whole import heap (85,000 objects) it costs
    80-100 ms of CPU right before the first frame and finds about 2,000 garbage objects
    (under 0.5 MB, kept once, never growing), which the freeze keeps instead."""
    import gc

    gc.freeze()
    gc.enable()  # off during start-up (``_run``)


def _console_problem(args: argparse.Namespace) -> str | None:
    """Why this invocation cannot run as asked, checked before anything starts (no lock, no
    agents): ``--exit-when-idle`` is a headless option, and the console needs a terminal.
    Textual reads keys from stdin and draws on stderr, and a piped stdout sends it into an
    endless resize loop; without a TTY on all three it would spin at full CPU, holding its
    agents (seen in fresh-user runs)."""
    if getattr(args, "exit_when_idle", False) and not args.headless:
        return "--exit-when-idle needs --headless (the console runs until you quit it)"
    if args.headless:
        return None
    return _no_terminal()


def _no_terminal(hint: str = "use --headless, or run it in tmux / `ssh -t`") -> str | None:
    """A one-line reason (ending with ``hint``) when stdin, stdout or stderr is not a
    terminal, else ``None``."""
    streams = (("stdin", sys.__stdin__), ("stdout", sys.__stdout__), ("stderr", sys.__stderr__))
    missing = [name for name, stream in streams if stream is None or not stream.isatty()]
    if not missing:
        return None
    names = missing[0] if len(missing) == 1 else ", ".join(missing[:-1]) + " and " + missing[-1]
    return (
        f"the console needs a terminal ({names} {'is' if len(missing) == 1 else 'are'} "
        f"not a TTY); {hint}"
    )


def _api_server(
    runtime,
    cli_port: int | None,
    *,
    announce: bool = False,
    say: Callable[[str], None] = _say,
    serve: bool = False,
    path: Path | None = None,
):
    """The HTTP API when ``--port`` or ``server.port`` asks for one (``--port`` wins), with
    its bearer token (a generated one is told to ``say``, once). With ``serve`` there is
    always one: without a configured port it listens on ``127.0.0.1``, any free port, with
    a generated token kept in the user's own state folder (``api/announce.py``), never
    printed, so the operator's next console can attach. Raises ``TokenError``, and
    ``OSError`` when the token file cannot be written."""
    server = runtime.store.current.settings.server
    port = cli_port if cli_port is not None else server.port
    if port is None and not serve:
        return None
    from symphony_tui.api import announce as notes
    from symphony_tui.api.auth import resolve_token
    from symphony_tui.api.server import ApiServer
    from symphony_tui.api.stream import StreamHub

    host = server.host
    if port is None:
        host, port = "127.0.0.1", 0
        choice = resolve_token(host, require_token=True)
    else:
        choice = resolve_token(
            server.host, token_env=server.auth_token_env, require_token=server.require_token
        )
        if choice.generated:
            say(
                "HTTP API token (shown once; clients send it as Authorization: Bearer): "
                f"{choice.token}"
            )
    extra = _note_extra(runtime, path)
    if choice.token and choice.generated and (announce or serve):
        # generated here, so the operator's own console and `ps` can find it (a token from
        # server.auth_token_env stays where the operator keeps it)
        extra["token_file"] = str(notes.write_token(notes.default_dir(), choice.token))
    return ApiServer(
        runtime.orchestrator,
        host=host,
        bind_port=port,
        token=choice.token,
        announce_dir=notes.default_dir() if announce or serve else None,
        allowed_hosts=server.allowed_hosts,
        stream=StreamHub(
            runtime.orchestrator,
            max_streams=server.max_streams,
            max_streams_per_client=server.max_streams_per_client,
        ),
        announce_extra=extra,
    )


def _note_extra(runtime, path: Path | None) -> dict:
    """What a scheduler's API note says beyond its address: its project and workflow."""
    lock = runtime.lock
    return {
        "project": lock.key if lock is not None else None,
        "workflow": str(path.resolve()) if path is not None else None,
    }


async def _headless(runtime, exit_when_idle: bool, api, path: Path | None = None) -> int:
    from symphony_tui.api import announce
    from symphony_tui.headless import run_headless

    noted = None
    if api is None:  # no API: still a note, so `ps` lists it and `stop PROJECT` finds it
        with contextlib.suppress(OSError):
            noted = announce.write(
                announce.default_dir(),
                host="",
                port=None,
                token=False,
                extra=_note_extra(runtime, path),
            )
    if api is not None:
        try:
            await api.start()
        except OSError:
            await runtime.close()
            raise
        print(f"symphony-tui: HTTP API on {api.url}", file=sys.stderr, flush=True)
    settings = runtime.store.current.settings
    if api is None and settings.agent.approvals == "operator":
        print(
            "symphony-tui: agent.approvals is 'operator' but no --port is set: approval "
            f"requests will be declined after {settings.agent.approval_timeout_ms // 1000}s "
            "(set agent.approvals, or serve the API and answer with `symphony-tui attach`)",
            file=sys.stderr,
            flush=True,
        )
    try:
        return await run_headless(runtime, exit_when_idle=exit_when_idle)
    finally:
        if api is not None:
            await api.stop(ending=runtime.stop_reason or "the headless scheduler ended")
        if noted is not None:
            announce.remove(noted)


def _attach(args: argparse.Namespace) -> int:
    problem = _no_terminal("run attach in a terminal, in tmux or over `ssh -t`")
    if problem:
        return _fail(f"attach: {problem}")
    from symphony_tui.api.attach import AttachError, open_attach

    token = os.environ.get(args.token_env) or None
    mode = "poll" if args.poll else "stream"
    try:
        attachment = open_attach(
            args.url, ssh=args.ssh, api_port=args.api_port, token=token, mode=mode
        )
    except AttachError as exc:
        return _fail(f"attach: {exc}")
    from symphony_tui.console.app import SymphonyApp

    try:
        remote = _attached_port(attachment, args, token)
        app = SymphonyApp(
            remote,
            runner=_heap_watched(remote.run),
            shutdown=remote.close,
            title=f"symphony @ {attachment}",
            terminal_modes=_modes_before(),
        )
        app.run()
    finally:
        attachment.close()
    return app.return_code or 0


def _attached_port(attachment, args: argparse.Namespace, token: str | None):
    """The port an ``attach`` console runs on (``api/follow.py``): one that follows its
    scheduler started again on another port when the attach named a host (``ssh://``
    without ``--api-port``: found again there by its workflow); one that watches its
    address for a scheduler started again there when the attach named an ``http(s)://``
    address; else (``--api-port`` over ssh) one that says how to attach again once its
    scheduler stopped."""
    from symphony_tui.api.attach import address_finder, host_finder
    from symphony_tui.api.follow import FIND_SSH_EVERY_S, FollowingPort
    from symphony_tui.api.ssh import parse_target

    host = args.ssh or (args.url if args.url.startswith("ssh://") else None)
    if host is None:
        find = address_finder(attachment.url, token=token, mode=attachment.mode)
        return FollowingPort(attachment, find, watching=attachment.url)
    if args.api_port is not None:
        return FollowingPort(attachment, again=f"symphony-tui attach {parse_target(host).name}")
    find = host_finder(parse_target(host), attachment.workflow, token=token, mode=attachment.mode)
    return FollowingPort(attachment, find, every_s=FIND_SSH_EVERY_S, watch_lost=True)


def _heap_watched(runner: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
    """``runner`` (an attached or fleet console's link) with this process's garbage
    collector kept as the scheduler's (``scheduler/heap_freeze.py``): start-up's heap
    frozen, and the heap frozen again shortly after each full collection, so the next one
    traverses only what was promoted since. Such a console holds every project's snapshot
    documents and rows, the events and the render caches (300,000 tracked objects at 20
    schedulers x 50 workers): unfrozen, a full collection ran every ~5 s for 120-210 ms of
    CPU (up to 480 ms of wall time), and a key pressed meanwhile waited for it
    (docs/benchmarks.md, the fleet console)."""

    async def run() -> None:
        import gc

        from symphony_tui.scheduler.heap_freeze import HeapFreezer

        gc.freeze()
        heap = HeapFreezer(lambda: True)
        heap.watch()
        try:
            await runner()
        finally:
            heap.close()

    return run


def _fleet(args: argparse.Namespace) -> int:
    """``symphony-tui fleet``: one console over many schedulers (docs/fleet.md)."""
    from symphony_tui.fleet import targets as tg
    from symphony_tui.fleet.cli import list_once
    from symphony_tui.fleet.port import FleetPort

    notices: list[str] = []
    try:
        if args.targets:
            targets = []
            for text in args.targets:
                target = tg.parse(text, token_env=args.token_env, token_file=args.token_file)
                if any(tg.identity(t) == tg.identity(target) for t in targets):
                    _say(f"fleet: {text} is given twice: watched once")
                else:
                    targets.append(target)
        else:
            listed, notices = tg.read_fleet_file(tg.fleet_file())
            # the command's token for the lines that name none of their own
            targets = [
                tg.parse("local", token_env=args.token_env, token_file=args.token_file),
                *(tg.with_flags(t, args.token_env, args.token_file) for t in listed),
            ]
    except tg.TargetError as exc:
        return _fail(f"fleet: {exc}", 2)
    for line in notices:
        _say(f"fleet: {line}")
    if args.list:
        return list_once(targets, wait_s=args.wait)
    problem = _no_terminal("run fleet in a terminal, in tmux or over `ssh -t`; or use --list")
    if problem:
        return _fail(f"fleet: {problem}")
    from symphony_tui.console.app import SymphonyApp

    fleet = FleetPort(targets, notices=notices)
    app = SymphonyApp(
        fleet,
        runner=_heap_watched(fleet.run),
        shutdown=fleet.close,
        title=f"symphony fleet ({len(targets)} target{'s' if len(targets) != 1 else ''})",
        terminal_modes=_modes_before(),
        notices=notices,
        notices_title="fleet file",
    )
    try:
        app.run()
    finally:
        fleet.end_forwards()  # when the app died before its shutdown closed them
    return app.return_code or 0


def demo_assets() -> Path:
    """The bundled demo folder: inside the installed package, or ``assets/demo`` in a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_assets" / "demo", here.parent / "assets" / "demo"):
        if (candidate / "WORKFLOW.md").is_file():
            return candidate
    raise FileNotFoundError("demo assets not found (assets/demo)")


DEMO_FILES = ("WORKFLOW.md", "issues.yaml", "README.md")


def prepare_demo(target: Path | None = None, *, approvals: str | None = None) -> Path:
    """Copy the demo into ``target`` (an empty folder), else a fresh temporary one;
    returns its WORKFLOW.md path.

    ``approvals`` replaces ``agent.approvals`` in the copy (headless runs have no operator,
    so ``demo --headless`` approves automatically).
    """
    folder = target or Path(tempfile.mkdtemp(prefix="symphony-demo-"))
    workflow = copy_demo(folder)
    if approvals is not None:
        text = workflow.read_text(encoding="utf-8")
        marker = "  approvals: operator\n"
        if marker not in text:
            raise FileNotFoundError("demo WORKFLOW.md has no `approvals: operator` line")
        workflow.write_text(text.replace(marker, f"  approvals: {approvals}\n"), encoding="utf-8")
    os.environ["SYMPHONY_PYTHON"] = sys.executable
    return workflow


def copy_demo(folder: Path) -> Path:
    """Write the demo project (:data:`DEMO_FILES`) into ``folder`` (created as needed) to
    run as a project of its own; returns its WORKFLOW.md. Raises ``FileExistsError`` when
    ``folder`` already has one of those files (nothing is overwritten), ``OSError`` (its
    message one line) when the folder cannot be made or written."""
    source = demo_assets()
    names = [name for name in DEMO_FILES if (source / name).is_file()]
    taken = [name for name in names if (folder / name).exists()]
    if taken:
        raise FileExistsError(
            f"{folder} already has {', '.join(taken)}; choose a folder without {', '.join(names)}"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name in names:
            with (source / name).open("rb") as src, (folder / name).open("xb") as dst:
                shutil.copyfileobj(src, dst)  # "x": never over a file made meanwhile
    except OSError as exc:
        raise OSError(f"cannot write the demo into {folder}: {exc.strerror or exc}") from exc
    return folder / "WORKFLOW.md"


def _demo(args: argparse.Namespace) -> int:
    if args.copy_to is not None:
        try:
            workflow = copy_demo(args.copy_to.expanduser())
        except OSError as exc:
            return _fail(f"demo: {exc}")
        print(f"symphony-tui: the demo project is in {workflow.parent}; run it with")
        print(f"  symphony-tui {shlex.quote(str(workflow))}")
        return 0
    problem = _console_problem(args)
    if problem:
        return _fail(problem)
    try:
        workflow = prepare_demo(approvals="auto" if args.headless else None)
    except (OSError, FileNotFoundError) as exc:
        return _fail(f"demo: {exc}")
    folder = workflow.parent
    print(f"symphony-tui: demo copy in {folder}", file=sys.stderr)
    try:
        return _run(
            workflow,
            args,
            lock=False,
            title="symphony demo",
            events_path=folder / "events.jsonl",
        )
    finally:
        if args.keep:
            print(f"symphony-tui: demo folder kept: {folder}", file=sys.stderr)
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
