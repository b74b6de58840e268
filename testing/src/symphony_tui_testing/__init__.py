"""symphony_tui_testing: fakes of what symphony_tui talks to outside this machine, for tests.

HTTP fakes of the trackers (``fake_linear``, ``fake_github``, ``fake_jira``, ``fake_gitlab``,
``fake_asana``) and of a model server (``fake_model``) listen on 127.0.0.1 and check each
request against the vendor's published description; ``scripted_backend``, ``memory_tracker``
and ``session_host`` stand in for an agent backend, a tracker and a session host in process,
``clock`` for the scheduler's time; ``codex_env``, ``openhands_env`` and ``opencode_env`` set
the real agent programs up against the fake model. The runtime package never imports this one.
"""

__version__ = "0.1.0"
"""The symphony-tui release these fakes belong to (they use its internal types)."""
