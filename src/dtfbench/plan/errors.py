"""The plan's one error: a request (a sweep, an AWS cluster) that cannot run."""


class PlanError(ValueError):
    """A request that cannot run, before anything starts; the message names the input, the
    problem and the fix."""
