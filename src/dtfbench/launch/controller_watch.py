# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""Whether the controller that waits on a module call went away (Ctrl-C, a lost connection).

Used by every module call that waits on something it started: tf_host_run (a host's TF
tasks) and slurm_job (a batch job); on the first sign each stops what it started.
"""

import select
import signal

INTERRUPT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class ControllerWatch:
    """Whether the controller that waits on this module call went away.

    Two signs, checked at every poll of the waiting phases: a signal (Ctrl-C or SIGTERM that
    ansible-playbook passes on to its worker's process group, which holds this process on a
    local connection; SIGHUP), and the hang-up of our standard output - the pipe to sshd (or,
    on a local connection, to the Ansible worker) is closed once the controller's side of
    the connection is gone, which is all a remote host ever learns of a dead controller.
    """

    def __init__(self):
        self.why = None
        self.poller = None
        try:
            self.poller = select.poll()
            self.poller.register(1, 0)  # POLLERR/POLLHUP are always reported
        except (OSError, ValueError):
            self.poller = None
        for signum in INTERRUPT_SIGNALS:
            signal.signal(signum, self.note)

    def note(self, signum, frame):
        if self.why is None:
            self.why = "%s to the module" % signal.Signals(signum).name

    def hang_ups(self):
        """The descriptors whose hang-up says the controller went away (for a poll to wake on)."""
        return (1,) if self.poller is not None else ()

    def gone(self):
        if self.why is None and self.poller is not None:
            for _fd, event in self.poller.poll(0):
                if event & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                    self.why = "the controller's connection was closed"
        return self.why
