"""A command on a worker host in a process group of its own, and how to end that group
(nothing of a run may survive on the host).

Killing the local ``ssh`` client does not end what it started: without a terminal, sshd
sends the remote command no signal, and an agent's children (a build, a test server) live
on. So every remote agent or hook runs under a small ``sh`` wrapper
(:func:`group_script`) that starts the command as the leader of a new session
(``setsid``, else ``perl``'s ``setpgrp``), writes that process group id (and the
host's ``uname -n`` on a second line) to a *pgid file* in the workspace, waits for it and
removes the file (an agent's file stays while a member of its group lives on:
``keep_while_group_lives``). :func:`kill_script` (run through a
second ssh connection) sends the group SIGTERM, waits up to ``grace_s``, then SIGKILL.

A host that was only unreachable (its network went away, it was not rebooted) keeps what
ran there, and the pgid files with it: :func:`reap_script` ends every group named by a
pgid file under the host's workspace root (but those of workspaces still in use), which
the scheduler runs when it first reaches the host and whenever the host is back up.

The command runs under ``bash -lc`` when the host has bash (what a local launch does,
spec §10.1), else ``sh -c``; the wrapper itself is plain POSIX ``sh``.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping

from symphony_tui.hosts.ssh import env_exports, sh_word

#: Exit status of the wrapper when the workspace folder cannot be entered.
NO_WORKSPACE_EXIT = 94
#: Exit status the shell uses for a program it cannot find (POSIX ``sh``).
NOT_FOUND_EXIT = 127


def home_path(path: str) -> str:
    """A path as a shell word; a leading ``~/`` becomes ``"$HOME"/`` (expanded there)."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def group_script(
    cwd: str,
    command: str,
    *,
    pgid_file: str,
    env: Mapping[str, str | None] | None = None,
    merge_stderr: bool = False,
    keep_while_group_lives: bool = False,
    end_group: bool = False,
    grace_s: float = 2.0,
) -> str:
    """The ``sh`` script that runs ``command`` in ``cwd`` as a new process group.

    ``env``: names to export (None: unset); ``pgid_file``: a path relative to ``cwd``
    (its folder is created); ``merge_stderr``: send the command's stderr to stdout (hook
    output); ``keep_while_group_lives``: leave the pgid file in place when the command
    exits while others of its group still run (an agent's children, which its stop or
    :func:`reap_script` then ends); ``end_group``: once the command exits, end what it
    left in its group (SIGTERM, up to ``grace_s`` seconds, SIGKILL; a hook's ``sleep
    3101 &``). stdin is passed through (an agent's JSON-RPC channel). Exits with the
    command's status, :data:`NO_WORKSPACE_EXIT` when ``cwd`` is missing."""
    exports = env_exports({k: v for k, v in (env or {}).items() if v is not None})
    unsets = "".join(f"unset {k}; " for k, v in (env or {}).items() if v is None)
    folder = pgid_file.rsplit("/", 1)[0] if "/" in pgid_file else "."
    redirect = " 2>&1" if merge_stderr else ""
    drop = (
        'kill -s 0 -- -"$pid" 2>/dev/null || rm -f "$pgf"; '
        if keep_while_group_lives
        else 'rm -f "$pgf"; '
    )
    if end_group:
        steps = max(1, int(grace_s * 10))
        drop = (
            'if kill -s TERM -- -"$pid" 2>/dev/null; then i=0; '
            f'while kill -s 0 -- -"$pid" 2>/dev/null && [ $i -lt {steps} ]; do '
            "sleep 0.1; i=$((i+1)); done; "
            'kill -s KILL -- -"$pid" 2>/dev/null; fi; ' + drop
        )
    return (
        f"cd {home_path(cwd)} 2>/dev/null || "
        f"{{ echo 'workspace {cwd} does not exist on this host' >&2; exit {NO_WORKSPACE_EXIT}; }}; "
        f"{unsets}{exports}"
        f"mkdir -p {shlex.quote(folder)} 2>/dev/null; "
        f"pgf={shlex.quote(pgid_file)}; "
        f"cmd={sh_word(command)}; "
        "if command -v bash >/dev/null 2>&1; then sh_=bash; fl=-lc; else sh_=sh; fl=-c; fi; "
        "if command -v setsid >/dev/null 2>&1; then "
        'set -- setsid "$sh_" "$fl" "$cmd"; '
        "elif command -v perl >/dev/null 2>&1; then "
        'set -- perl -e \'setpgrp(0,0); exec @ARGV or exit 127\' "$sh_" "$fl" "$cmd"; '
        'else set -- "$sh_" "$fl" "$cmd"; fi; '
        # A background job's stdin would be /dev/null (POSIX, without job control):
        # keep the channel on fd 3 and give it back.
        "exec 3<&0; "
        f'"$@" 0<&3 3<&-{redirect} & '
        'pid=$!; exec 3<&-; { echo "$pid"; uname -n; } > "$pgf" 2>/dev/null; '
        "trap 'kill -s TERM -- -$pid 2>/dev/null' HUP TERM; "
        f'wait "$pid"; rc=$?; {drop}exit $rc'
    )


def kill_script(cwd: str, pgid_file: str, *, grace_s: float = 2.0) -> str:
    """The ``sh`` script that ends the group named in ``pgid_file`` (relative to
    ``cwd``): SIGTERM, up to ``grace_s`` seconds, SIGKILL. Prints ``killed <pgid>``,
    ``gone`` (the group had ended) or ``none`` (no pgid file). Exit 0 in every case."""
    steps = max(1, int(grace_s * 10))
    return (
        f"cd {home_path(cwd)} 2>/dev/null || {{ echo none; exit 0; }}; "
        f"pgf={shlex.quote(pgid_file)}; "
        '[ -f "$pgf" ] || { echo none; exit 0; }; '
        'pid=; read pid < "$pgf"; '
        'case "$pid" in ""|*[!0-9]*) rm -f "$pgf"; echo none; exit 0;; esac; '
        'kill -s 0 -- -"$pid" 2>/dev/null || { rm -f "$pgf"; echo gone; exit 0; }; '
        'kill -s TERM -- -"$pid" 2>/dev/null; i=0; '
        f'while kill -s 0 -- -"$pid" 2>/dev/null && [ $i -lt {steps} ]; do '
        "sleep 0.1; i=$((i+1)); done; "
        'kill -s KILL -- -"$pid" 2>/dev/null; rm -f "$pgf"; echo "killed $pid"; exit 0'
    )


def alive_script(cwd: str, pgid_file: str) -> str:
    """Prints ``alive <pgid>`` while the group in ``pgid_file`` has a live member, else
    ``none`` (for tests and diagnostics)."""
    return (
        f"cd {home_path(cwd)} 2>/dev/null || {{ echo none; exit 0; }}; "
        f"pid=; read pid < {shlex.quote(pgid_file)} 2>/dev/null; "
        '[ -n "$pid" ] && kill -s 0 -- -"$pid" 2>/dev/null && echo "alive $pid" || echo none'
    )


def reap_script(root: str, skip: Iterable[str] = (), *, grace_s: float = 2.0) -> str:
    """The ``sh`` script that ends every process group named by a pgid file of a
    workspace under ``root`` (``<root>/<key>/.symphony/*.pgid``), except the workspaces
    whose key is in ``skip`` (runs using them now, on any host: a root on a shared file
    system holds other hosts' workspaces too) and the files another machine wrote
    (``uname -n``, the file's second line). SIGTERM to all, up to ``grace_s``
    seconds, SIGKILL to what is left; each file is removed. Prints ``killed <key>
    <pgid>`` per group ended. Exit 0 (also when ``root`` is missing).

    A pid is reused once its group is gone: where ``/proc`` shows the group's leader
    alive, it must still be in that workspace (its working directory), else the file is
    only removed (the group it named ended long ago, e.g. the host rebooted)."""
    words = " ".join(shlex.quote(k) for k in skip if k and " " not in k)
    steps = max(1, int(grace_s * 10))
    return (
        f"cd {home_path(root)} 2>/dev/null || exit 0; root=$(pwd -P); pids=; here=$(uname -n); "
        'for f in "$root"/*/.symphony/*.pgid; do [ -f "$f" ] || continue; '
        "d=${f%/.symphony/*}; k=${d##*/}; "
        f'case " {words} " in *" $k "*) continue;; esac; '
        'pid=; node=; { read pid; read node; } < "$f"; '
        '[ -z "$node" ] || [ "$node" = "$here" ] || continue; rm -f "$f"; '
        'case "$pid" in ""|*[!0-9]*) continue;; esac; '
        'kill -s 0 -- -"$pid" 2>/dev/null || continue; '
        'if [ -d /proc/"$pid" ]; then c=$(readlink /proc/"$pid"/cwd 2>/dev/null); '
        'case "$c" in ""|"$d"|"$d"/*) ;; *) continue;; esac; fi; '
        'kill -s TERM -- -"$pid" 2>/dev/null; pids="$pids $pid"; echo "killed $k $pid"; '
        "done; "
        '[ -n "$pids" ] || exit 0; i=0; '
        f"while [ $i -lt {steps} ]; do left=; "
        'for p in $pids; do kill -s 0 -- -"$p" 2>/dev/null && left=1; done; '
        '[ -n "$left" ] || break; sleep 0.1; i=$((i+1)); done; '
        'for p in $pids; do kill -s KILL -- -"$p" 2>/dev/null; done; exit 0'
    )


def detached_script(
    cwd: str,
    command: str,
    *,
    pgid_file: str,
    log_file: str,
    env: Mapping[str, str | None] | None = None,
) -> str:
    """The ``sh`` script that starts ``command --listen unix://<socket>`` in ``cwd``
    detached from the ssh session: a new session (``setsid``, else ``perl``'s
    ``setpgrp``), stdin ``/dev/null``, output appended to ``log_file`` (relative to
    ``cwd``), so the connection that started it may end and it goes on. The socket is
    ``app.sock`` in a new folder only this user can enter (``mktemp -d`` under
    ``$TMPDIR`` or ``/tmp``: a unix socket path is limited to about 100 bytes). The
    group is written to ``pgid_file`` as :func:`group_script` does (so :func:`kill_script`
    and :func:`reap_script` find it). Prints ``<pgid> <socket> <start ticks or ->``;
    exits :data:`NO_WORKSPACE_EXIT` when ``cwd`` is missing, 1 when nothing started."""
    exports = env_exports({k: v for k, v in (env or {}).items() if v is not None})
    unsets = "".join(f"unset {k}; " for k, v in (env or {}).items() if v is None)
    folder = pgid_file.rsplit("/", 1)[0] if "/" in pgid_file else "."
    return (
        f"cd {home_path(cwd)} 2>/dev/null || "
        f"{{ echo 'workspace {cwd} does not exist on this host' >&2; exit {NO_WORKSPACE_EXIT}; }}; "
        f"{unsets}{exports}"
        f"mkdir -p {shlex.quote(folder)} 2>/dev/null; "
        f"pgf={shlex.quote(pgid_file)}; log={shlex.quote(log_file)}; "
        'd=$(umask 077; mktemp -d "${TMPDIR:-/tmp}/symphony-codex-XXXXXX") || exit 1; '
        f'cmd={sh_word(command)}" --listen unix://$d/app.sock"; '
        "if command -v bash >/dev/null 2>&1; then sh_=bash; fl=-lc; else sh_=sh; fl=-c; fi; "
        "if command -v setsid >/dev/null 2>&1; then "
        'set -- setsid "$sh_" "$fl" "$cmd"; '
        "elif command -v perl >/dev/null 2>&1; then "
        'set -- perl -e \'setpgrp(0,0); exec @ARGV or exit 127\' "$sh_" "$fl" "$cmd"; '
        "else echo 'neither setsid nor perl on this host' >&2; exit 1; fi; "
        '"$@" </dev/null >>"$log" 2>&1 & '
        'pid=$!; { echo "$pid"; uname -n; } > "$pgf" 2>/dev/null; '
        "t=$(cut -d' ' -f22 /proc/$pid/stat 2>/dev/null); "
        'echo "$pid $d/app.sock ${t:--}"'
    )
