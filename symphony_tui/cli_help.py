"""The ``--help`` texts of the command line: what each command does, the WORKFLOW.md
settings it reads and the environment variables it honours (docs/configuration.md
has every setting)."""

from __future__ import annotations

from symphony_tui.paths import PATH_ENV_VARS, user_paths

MAIN_DESCRIPTION = (
    "Symphony scheduler for coding agents with a terminal operator console.\n"
    "`symphony-tui WORKFLOW.md` is `symphony-tui run WORKFLOW.md`; "
    "`symphony-tui COMMAND --help` tells more about each command."
)

_PATH_ENV = (
    "  XDG_CONFIG_HOME, XDG_STATE_HOME  move the config and state folders (XDG base dirs)\n"
    "  SYMPHONY_LOCK_DIR     folder of the host-wide project lock files"
)

_RUN_SETTINGS = """\
WORKFLOW.md settings (YAML front matter; the body is the prompt template):
  tracker.kind (linear | local | github), tracker.api_key, tracker.project_slug, tracker.path,
  tracker.repo, tracker.token, tracker.api_url, tracker.project   (github)
  tracker.active_states, tracker.terminal_states   where issues come from
  polling.interval_ms   how often the tracker is polled
  workspace.root        where each issue's workspace folder is made
  hooks.after_create, hooks.before_run, hooks.after_run, hooks.before_remove
  agent.backend (codex | openhands | opencode), agent.max_concurrent_agents,
  agent.max_turns, agent.approvals (operator | auto | deny), agent.approval_timeout_ms
  codex.command, openhands.command / openhands.base_url, opencode.command / opencode.base_url
  server.port, server.host   the HTTP API (--port beats server.port)
A value written `$NAME` is read from the environment variable NAME."""

_RUN_ENV = f"""\
environment:
  LINEAR_API_KEY        the Linear key when tracker.api_key is not set
  GITHUB_TOKEN, GITHUB_REPO   tracker.kind github: the token and repo when not set
{_PATH_ENV}
Reloads: WORKFLOW.md is watched and re-read while running."""


def _files() -> str:
    rows = "\n".join(f"  {label:<11} {path}" for label, path in user_paths())
    return f"files (`symphony-tui paths WORKFLOW.md` adds the project's):\n{rows}"


def main_epilog() -> str:
    return f"{_files()}\n\nenvironment: {', '.join(PATH_ENV_VARS)} (see `paths --help`)"


# name -> (one-line summary, description, epilog)
COMMAND_HELP: dict[str, tuple[str, str, str]] = {
    "run": (
        "run the scheduler on a WORKFLOW.md (the default command)",
        "Poll the tracker, dispatch agents to eligible issues and show them in the console "
        "(or run headless). Exit 0 on a normal quit, 1 on a start-up failure, 2 on a usage "
        "error; errors are one line on stderr.",
        f"{_RUN_SETTINGS}\n\n{_RUN_ENV}",
    ),
    "demo": (
        "the built-in example: local tracker, simulated agent, no account",
        "Copy the bundled demo project to a temporary folder (removed on exit unless --keep) "
        "and run it: a local issues.yaml tracker and a simulated agent that speaks the Codex "
        "app-server protocol. No network, no account. --headless approves automatically.",
        "environment:\n"
        "  SYMPHONY_DEMO_SPEED   multiplies the simulated agent's pauses (0 = none, 2 = slower)\n"
        "  SYMPHONY_PYTHON       the Python that runs the demo agent (default: this one)\n"
        f"{_PATH_ENV}",
    ),
    "doctor": (
        "check a WORKFLOW.md: settings, agent start, tracker, lock; creates nothing",
        "Run each start-up check and print one line per check: the workflow loads (unknown "
        "keys are warned about, with the likely meant key); dispatch settings validate; the "
        "workspace root could be created; the agent starts (codex: the app-server answers "
        "`initialize`; openhands/opencode: the server answers its health check); the project "
        "lock is free; the tracker answers a candidate fetch. Prints the paths a run would "
        "use. Exit 0 when every check passes, 1 otherwise.",
        "settings read: tracker.*, workspace.root, agent.backend, codex.command, "
        "codex.read_timeout_ms,\n  openhands.command / openhands.base_url, opencode.command / "
        "opencode.base_url\n\nenvironment:\n"
        "  LINEAR_API_KEY        the Linear key when tracker.api_key is not set\n"
        "  GITHUB_TOKEN, GITHUB_REPO   tracker.kind github: the token and repo when not set\n"
        f"{_PATH_ENV}",
    ),
    "attach": (
        "open the console on a headless scheduler's HTTP API",
        "Open the operator console on a scheduler started elsewhere with "
        "`symphony-tui run --headless --port N` (or server.port in its WORKFLOW.md). "
        "Needs a terminal.",
        "The scheduler's side: server.port and server.host (default 127.0.0.1) in its "
        "WORKFLOW.md,\nor --port. Over SSH: forward the port (`ssh -L 8080:127.0.0.1:8080 host`) "
        "and attach to it.",
    ),
    "fleet": (
        "one console over many schedulers: this machine's, http(s):// APIs, ssh:// hosts",
        "Open one operator console over several schedulers (docs/fleet.md). A TARGET is a "
        "WORKFLOW.md (the scheduler running it here), http(s)://HOST:PORT (its token from "
        "--token-env, --token-file or $SYMPHONY_API_TOKEN), ssh://[user@]host[:port] (every "
        "scheduler of that user there, each through its own ssh forward) or local (every "
        "scheduler of this user here). Without targets: local plus the fleet file. Commands "
        "go to the row's own scheduler, audited there as `via fleet`. Needs a terminal "
        "(--list prints each project's state instead; exit 0 when every project is live, "
        "1 when none is found or any is not, so a script can tell).",
        "The fleet file (<config dir>/fleet, see `symphony-tui paths`): one target a line, "
        "optionally\nfollowed by name=NAME, token-env=VAR or token-file=PATH; # starts a "
        "comment.",
    ),
    "paths": (
        "print where logs, event history, keymap, locks and state live",
        "Print the files and folders symphony-tui uses; with a WORKFLOW.md (default "
        "./WORKFLOW.md when present) also the project's event history, lock file and "
        "workspace root. Creates nothing.",
        f"environment:\n{_PATH_ENV}",
    ),
    "stats": (
        "runs, success rate, run time, tokens and spend of a project over a period",
        "Print what the project's runs did over a period (default the last 7 days): runs, "
        "success rate, p50 / p95 run time, tokens and spend per issue and per succeeded "
        "issue, a row per issue, and the usage ledger's all-time totals. Reads the event "
        "history and the usage ledger; runs nothing.",
        "--since takes 7d, 24h, 30m, 2w, a date (2026-05-01) or all. Spend is in US dollars\n"
        "as priced by the workflow's pricing table when each run was counted; runs of an\n"
        "unknown model or without a usage report are counted as such, never as free.",
    ),
    "ps": (
        "list this user's running schedulers: project, pid, since, agents, approvals, API",
        "List every running scheduler of this user (console or headless): its project, pid, "
        "start time, running agents, approvals waiting and API address (`-` for a headless "
        "one without --port; a console's serves one on loopback). `symphony-tui WORKFLOW.md` "
        "attaches to the one running that project.",
        f"environment:\n{_PATH_ENV}",
    ),
    "stop": (
        "stop a running scheduler gracefully (its agents end, hooks get their grace)",
        "Stop the scheduler running a WORKFLOW.md's project (or its folder's; default "
        "./WORKFLOW.md), or the "
        "one `ps` entry whose project, workflow or pid matches PROJECT: it gets SIGTERM, ends "
        "its agents, gives running hooks hooks.shutdown_grace_ms, and exits; this waits for "
        "it. Exit 0 once it ended, 1 when there is none, it is another user's, or it is still "
        "running at --timeout.",
        f"environment:\n{_PATH_ENV}",
    ),
}
