"""Worker hosts as the scheduler sees them: placement, down and drained hosts, probes
(``book``), and the operator's host commands (``commands``)."""
