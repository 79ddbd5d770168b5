"""The two ways a workload run ends badly, mapped to exit codes by ``dtfbench train``.

- ``UsageError``: the command line (or TF_CONFIG) is wrong; exit 2, before any server starts.
- ``RunFailure``: the run started but could not finish (a peer died, a step or the start-up
  timed out); exit 1, with a JSON result whose status is "failed".
"""

USAGE_EXIT_CODE = 2
FAILURE_EXIT_CODE = 1
PROG = "dtfbench train"


class UsageError(Exception):
    """Bad input. The message names the input, what is wrong and how to fix it."""


class RunFailure(Exception):
    """The run could not finish. ``peer`` names the task at fault when it is known."""

    def __init__(self, reason, peer=None):
        super().__init__(reason)
        self.reason = reason
        self.peer = peer


def error_line(message):
    """The one stderr line every failure prints (argparse style)."""
    return f"{PROG}: error: {message}"
