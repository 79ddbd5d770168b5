"""The scaling model: predicted step time of a distributed configuration, fitted per system.

Step time (seconds, one synchronous step of every worker) =

    max( t1, B / bandwidth )  +  overheads

    overheads = x_sync*[gpus > 1] + x_byte*B + x_local*L + x_worker*W + x_hop*R

The transfer of the variables and gradients overlaps with the GPU compute (variables are
fetched as the forward pass needs them, gradients sent as the backward pass makes them);
the overheads (the step's barrier, the PS's handling of each sender's requests, the copies
of each byte) overlap with neither, so they add to the step whether the GPU or the link
sets it.

- ``t1`` is the 1-GPU step time, batch / (1-GPU images/sec): the compute, never fitted.
- ``B`` is the bytes (GB) the busiest node's NIC moves in one direction per step, from the
  model's variable bytes ``S`` (float32) and the layout (``node_bytes``): a sender (a GPU in
  ``parameter_server``; a node in ``distributed_replicated``, which adds up its GPUs' gradients
  first) sends S and receives S; a PS receives its share of the variables from every sender.
  The share is not S/p for many PSs: one PS holds the largest variable whole (InceptionV3's
  2048x1000 classifier, 8 MB), so adding PSs past S / largest stops helping. PSs share the
  worker nodes (the study's best setting) or have nodes of their own. ``collective_all_reduce``
  (a ring over the ``n`` worker nodes, no PS) moves 2(n-1)/n S through every node's NIC.
- ``L`` is the bytes a node's GPUs aggregate inside the node ((g-1) S, PCIe); ``W`` the
  senders a PS serves (its per-request overhead: the PS incast, none in all-reduce); ``R`` the
  hops of the all-reduce ring, 2(n-1) (each a latency no byte rate hides: the cost per step
  that grows with the nodes; 0 in the PS modes); ``x_sync`` the synchronous step's fixed cost.
- ``bandwidth`` is the link rate the busiest NIC achieves (GB/s): when its bytes take longer
  than the GPU compute, the network sets the step (the configuration is network-bound).

max(t1, B / bandwidth) is the fluid bound: past the onset the busiest NIC is never idle. That
holds for synchronous steps, whose transfers start together. Asynchronous PS workers
(``cross_replica_sync`` off) each pull, compute and push on their own, and take turns on the
PS's link in and out: when all of them happen to be pulling, the inbound link idles. Their
step is the cycle of a closed queueing network (``random_turns_step``: the PS's link in and
out, shared fairly among the flows on it, and the rest of the 1-GPU step between them), which
lies above the fluid bound near and past the onset; a run may fall into better order than
random turns (two workers often alternate), so a fit takes a measured step between the two as
the turns' doing, not as overheads.

The per-system parameters ``x_*`` are fitted by non-negative least squares
(``scipy.optimize.nnls``) on relative residuals to what each run took beyond
max(t1, B / bandwidth), for each candidate bandwidth of a geometric grid (profile search;
equal fits: the highest rate); the bandwidth is kept only when the data show it, by
Akaike's criterion against no network limit (one parameter more must pay for itself; residuals
under the run-to-run noise, 2%, count as that noise). A
run whose bytes could not have crossed the link in its measured step bounds the bandwidth
from below. images/sec = gpus x batch / step. Details and the fit of the study's tables:
``docs/scaling_model.md``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

GB = 1e9
FLOAT_BYTES = 4

# Parameters (float32 values) of the models the workload builds (keras.applications, 1000
# classes; total incl. batch-norm statistics, which live on the PSs too) and of the largest
# single variable, which one PS holds whole.
MODEL_VARIABLES: dict[str, tuple[int, int]] = {
    "inception3": (23_851_784, 2_048 * 1_000),  # the classifier kernel 2048x1000
    "resnet50": (25_636_712, 2_048 * 1_000),
    "resnet101": (44_707_176, 2_048 * 1_000),
    "vgg16": (138_357_544, 25_088 * 4_096),  # fc1 kernel
}

PS_UPDATES = ("parameter_server", "distributed_replicated")
ALL_REDUCE = "collective_all_reduce"
VARIABLE_UPDATES = (*PS_UPDATES, ALL_REDUCE)
FEATURES = ("sync", "bytes", "local", "workers", "ring")
# Bandwidth candidates: from the floor the runs set (bytes / step) up 10^4 times.
BANDWIDTH_GRID_POINTS = 400
BANDWIDTH_GRID_SPAN = 1e4
# Run-to-run noise of a configuration's mean (relative): a fit closer than this is no better
# (Akaike's criterion with this floor under the residual; without it, 5 runs and 4 parameters
# let any extra parameter look good). The validation's extrapolation errors are the same with
# 1% to 3%; its leave-one-out maximum is 1.9% with 1% or 2%, 13.5% with 3%.
NOISE = 0.02


class ModelError(ValueError):
    """Input the model cannot use (no 1-GPU run, an unknown model, a bad configuration)."""


@dataclass(frozen=True)
class Variables:
    """The model's variable bytes: all of them, and the largest single variable."""

    total_bytes: float
    largest_bytes: float

    @classmethod
    def of(
        cls, model: str | None = None, total_bytes: float | None = None, largest_bytes: float | None = None
    ) -> Variables:
        if total_bytes is not None:
            if total_bytes <= 0 or (largest_bytes is not None and not 0 <= largest_bytes <= total_bytes):
                raise ModelError(
                    f"variable bytes {total_bytes} / largest {largest_bytes}: need total > 0 and 0 <= largest <= total"
                )
            return cls(float(total_bytes), float(largest_bytes or 0.0))
        if model not in MODEL_VARIABLES:
            raise ModelError(
                f"no variable sizes for model {model!r}; known: {', '.join(MODEL_VARIABLES)} "
                "(or give the variable bytes, --variable-bytes)"
            )
        params, largest = MODEL_VARIABLES[model]
        return cls(params * FLOAT_BYTES, largest * FLOAT_BYTES)


@dataclass(frozen=True)
class Config:
    """One configuration: GPUs in all, GPUs per node, PSs, variable update, PS placement.

    ``collective_all_reduce`` has no PS: num_ps 0 (and PS placement means nothing).
    """

    gpus: int
    gpus_per_node: int
    num_ps: int
    variable_update: str
    ps_on_worker_nodes: bool = True
    # cross_replica_sync: False for asynchronous PS workers, which take turns on the PS's link.
    synchronous: bool = True

    def __post_init__(self):
        if self.gpus < 1 or self.gpus_per_node < 1:
            raise ModelError(f"gpus={self.gpus}, gpus_per_node={self.gpus_per_node}: both must be >= 1")
        if self.variable_update not in VARIABLE_UPDATES:
            raise ModelError(f"variable_update={self.variable_update!r}: the model knows {', '.join(VARIABLE_UPDATES)}")
        if self.all_reduce and self.num_ps != 0:
            raise ModelError(f"num_ps={self.num_ps}: {ALL_REDUCE} has no parameter servers, num_ps = 0")
        if not self.all_reduce and self.num_ps < 1:
            raise ModelError(f"num_ps={self.num_ps}: {self.variable_update} needs parameter servers, num_ps >= 1")

    @property
    def all_reduce(self) -> bool:
        return self.variable_update == ALL_REDUCE

    @property
    def nodes(self) -> int:
        """Worker nodes."""
        return math.ceil(self.gpus / self.gpus_per_node)

    @property
    def instances(self) -> int:
        """Nodes the configuration occupies (worker nodes plus PS nodes when separate)."""
        return self.nodes + (0 if self.ps_on_worker_nodes or self.all_reduce else self.num_ps)

    @property
    def gpus_on_a_node(self) -> float:
        return self.gpus / self.nodes

    @property
    def senders_per_node(self) -> float:
        return self.gpus_on_a_node if self.variable_update == "parameter_server" else 1.0

    @property
    def takes_turns(self) -> bool:
        """Asynchronous PS workers: each one's pull and push take turns with the others' on the
        PS's link (synchronous steps and all-reduce rings move their bytes together)."""
        return not self.synchronous and not self.all_reduce

    @property
    def crossing_senders(self) -> int:
        """The senders whose pulls and pushes cross the busiest PS host's NIC (those beside it
        stay on the node): every sender when the PSs have nodes of their own."""
        senders = self.nodes * self.senders_per_node
        if self.ps_on_worker_nodes:
            senders -= self.senders_per_node
        return max(1, round(senders))


def random_turns_step(customers: int, transfer_s: float, think_s: float) -> float:
    """One worker's cycle (s) when `customers` workers each pull through the PS's link out, push
    through its link in (`transfer_s` each, alone on the link; a link shared fairly among the
    flows on it) and spend `think_s` elsewhere between them: exact mean value analysis of the
    closed queueing network (Reiser and Lavenberg, 1980). Fair sharing is processor sharing,
    whose answer does not depend on how the transfer times are distributed (BCMP), so the
    fixed transfers of a PS's workers are covered. The link's busy share, one direction, is
    customers * transfer_s / cycle; with no think time, customers / (customers + 1)."""
    if customers < 1 or transfer_s < 0 or think_s < 0:
        raise ModelError(f"customers={customers}, transfer_s={transfer_s}, think_s={think_s}: need >= 1, >= 0, >= 0")
    queue = [0.0, 0.0]  # mean flows on the link out (pulls) and in (pushes)
    cycle = think_s + 2 * transfer_s
    for n in range(1, customers + 1):
        residence = [transfer_s * (1 + q) for q in queue]
        cycle = think_s + sum(residence)
        queue = [n / cycle * r for r in residence]
    return cycle


def node_bytes(config: Config, variables: Variables) -> float:
    """Bytes (GB) the busiest node's NIC moves in one direction in one step."""
    S, big = variables.total_bytes / GB, variables.largest_bytes / GB
    n, p, u = config.nodes, config.num_ps, config.senders_per_node
    if config.all_reduce:
        # Ring all-reduce over the nodes (a node's GPUs add up inside it first): reduce-scatter
        # and all-gather each pass (n-1)/n of S through every node, in each direction.
        return 2 * (n - 1) / n * S
    senders = n * u
    if config.ps_on_worker_nodes and n == 1:
        return 0.0  # everything stays on the node
    # The busiest PS host holds k PSs; one of them the largest variable whole.
    hosts = n if config.ps_on_worker_nodes else p
    k = math.ceil(p / hosts)
    share = min(S, max(S / p, big) + (k - 1) * S / p)
    if config.ps_on_worker_nodes:
        remote_senders = senders - u
        ps_host = u * S * (1 - k / p) + remote_senders * share  # its own traffic + its PSs'
        plain = u * S  # a node holding no PS
        return max(ps_host, plain if p < n else 0.0)
    return max(u * S, senders * share)


def features(config: Config, variables: Variables) -> dict[str, float]:
    """The overheads' terms (beyond t1), and the bytes through the busiest NIC."""
    S = variables.total_bytes / GB
    g = config.gpus_on_a_node
    multi = config.nodes > 1 or not (config.ps_on_worker_nodes or config.all_reduce)
    b = node_bytes(config, variables)
    return {
        "sync": 1.0 if config.gpus > 1 else 0.0,
        "bytes": b,
        "local": (g - 1) * S if g > 1 else 0.0,
        "workers": config.nodes * config.senders_per_node if multi and not config.all_reduce else 0.0,
        "ring": 2.0 * (config.nodes - 1) if config.all_reduce else 0.0,
        "node_bytes": b,
    }


def turns_step(config: Config, t1: float, transfer_s: float) -> float:
    """The step of asynchronous PS workers whose busiest NIC needs `transfer_s` a step for all of
    them, one direction (``random_turns_step``): each crossing sender's pull and push take
    transfer_s / senders alone on the link, and the rest of its 1-GPU step, t1 less its own
    pull and push, happens between them. Never under the fluid bound max(t1, transfer_s)."""
    customers = config.crossing_senders
    demand = transfer_s / customers
    return random_turns_step(customers, demand, max(t1 - 2 * demand, 0.0))


@dataclass
class Fit:
    """A fitted system: t1, the coefficients, the bandwidth (inf: no limit seen), the residuals."""

    t1: float
    batch_size: int
    variables: Variables
    coefficients: dict[str, float]
    bandwidth_gb_s: float
    bandwidth_floor_gb_s: float
    rms_relative_error: float
    points: int
    network_bound_points: int = 0
    notes: list[str] = field(default_factory=list)
    # False when no run was a multi-node all-reduce: its per-hop cost is unknown (taken as 0).
    all_reduce_fitted: bool = True
    # True when the fitted PS runs were asynchronous (cross_replica_sync off): the planner's
    # candidate configurations are then asynchronous too (``Fit.config``).
    asynchronous: bool = False

    def config(self, gpus: int, gpus_per_node: int, num_ps: int, variable_update: str, **placement) -> Config:
        """A configuration to predict, updated as the fitted runs were (synchronous or not)."""
        return Config(gpus, gpus_per_node, num_ps, variable_update, synchronous=not self.asynchronous, **placement)

    def transfer_time(self, config: Config) -> float:
        """Seconds the busiest NIC needs for its bytes at the fitted rate (0 with no limit seen)."""
        f = features(config, self.variables)
        return f["node_bytes"] / self.bandwidth_gb_s if math.isfinite(self.bandwidth_gb_s) else 0.0

    def base_step(self, config: Config) -> float:
        """The step before overheads: the fluid bound max(t1, transfer), or for workers that take
        turns on the PS's link, their cycle with random turns (``turns_step``)."""
        transfer = self.transfer_time(config)
        if config.takes_turns and transfer > 0:
            return turns_step(config, self.t1, transfer)
        return max(self.t1, transfer)

    def overheads(self, config: Config) -> float:
        """Seconds of the step that overlap with neither the GPU compute nor the transfer."""
        f = features(config, self.variables)
        return sum(self.coefficients.get(k, 0.0) * f[k] for k in FEATURES)  # a term not given costs 0

    def step_time(self, config: Config) -> float:
        return self.base_step(config) + self.overheads(config)

    def network_bound(self, config: Config) -> bool:
        """The transfer takes longer than the GPU compute it overlaps with."""
        return self.transfer_time(config) > self.t1

    def images_per_sec(self, config: Config) -> float:
        return config.gpus * self.batch_size / self.step_time(config)

    def as_dict(self) -> dict[str, Any]:
        return {
            "t1_s": self.t1,
            "batch_size": self.batch_size,
            "variable_bytes": self.variables.total_bytes,
            "largest_variable_bytes": self.variables.largest_bytes,
            "coefficients": dict(self.coefficients),
            "bandwidth_gb_s": self.bandwidth_gb_s if math.isfinite(self.bandwidth_gb_s) else None,
            "bandwidth_floor_gb_s": self.bandwidth_floor_gb_s,
            "rms_relative_error": self.rms_relative_error,
            "points": self.points,
            "network_bound_points": self.network_bound_points,
            "notes": list(self.notes),
            "all_reduce_fitted": self.all_reduce_fitted,
            "asynchronous": self.asynchronous,
        }


@dataclass(frozen=True)
class Observation:
    config: Config
    images_per_sec: float


def _nnls(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """scipy.optimize.nnls's solution. Imported at the first fit: scipy.optimize takes ~0.12 s to
    import, and every sweep's table imports this module (its forecast section) where only a sweep
    of several GPU counts fits anything."""
    from scipy.optimize import nnls

    return nnls(A, b)[0]


def _nnls_overheads(A: np.ndarray, y: np.ndarray, base: np.ndarray) -> np.ndarray:
    """NNLS of the overheads on what the runs took beyond max(t1, transfer), relative to the step."""
    return _nnls(A / y[:, None], (y - base) / y)


def _prepare(observations: Sequence[Observation], batch_size: int, variables: Variables):
    """(t1, floor, evaluate, kinds): the 1-GPU step, the rate the busiest NIC was seen to
    carry (GB/s), evaluate(bandwidth) -> (rss, bandwidth, coefficients, network-bound points,
    rows), and (whether a multi-node all-reduce run is among them, so that its per-hop cost is
    fitted; whether the PS runs were asynchronous)."""
    obs = [o for o in observations if o.images_per_sec and o.images_per_sec > 0]
    if not obs:
        raise ModelError("no runs to fit: the model needs the system's runs, the 1-GPU one at least")
    ones = [o.images_per_sec for o in obs if o.config.gpus == 1]
    if not ones:
        raise ModelError("no 1-GPU run: the compute term is the 1-GPU rate; measure gpus=1 first")
    t1 = batch_size / max(ones)
    y = np.array([o.config.gpus * batch_size / o.images_per_sec for o in obs])
    F = [features(o.config, variables) for o in obs]
    A = np.array([[f[k] for k in FEATURES] for f in F])
    B = np.array([f["node_bytes"] for f in F])
    turns = [i for i, o in enumerate(obs) if o.config.takes_turns and B[i] > 0]

    def evaluate(bandwidth: float):
        network = B / bandwidth if math.isfinite(bandwidth) else np.zeros_like(B)
        base = np.maximum(t1, network)  # the GPU compute and the transfer overlap
        if math.isfinite(bandwidth):
            # Workers that take turns: a step between the fluid bound (perfect order) and random
            # turns is the turns' doing; only what lies beyond random turns is overheads.
            for i in turns:
                base[i] = min(max(base[i], y[i]), turns_step(obs[i].config, t1, network[i]))
        x = _nnls_overheads(A, y, base)
        pred = base + A @ x
        rss = float(np.sum(((pred - y) / y) ** 2))
        bound = int(np.sum(network > t1))
        return rss, bandwidth, x, bound, len(y)

    floor = float(np.max(B / y)) if B.any() else 0.0
    asynchronous = any(o.config.takes_turns for o in obs)
    return t1, floor, evaluate, (any(f["ring"] for f in F), asynchronous)


def _as_fit(
    chosen, t1: float, floor: float, batch_size: int, variables: Variables, notes: list[str], kinds: tuple[bool, bool]
) -> Fit:
    ring_fitted, asynchronous = kinds
    rss, bandwidth, x, bound, n = chosen
    return Fit(
        t1=t1,
        batch_size=batch_size,
        variables=variables,
        coefficients={k: float(v) for k, v in zip(FEATURES, x)},
        bandwidth_gb_s=float(bandwidth),
        bandwidth_floor_gb_s=floor,
        rms_relative_error=math.sqrt(rss / n),
        points=n,
        network_bound_points=bound,
        notes=notes,
        all_reduce_fitted=ring_fitted,
        asynchronous=asynchronous,
    )


def fit(
    observations: Sequence[Observation], batch_size: int, variables: Variables, link_gb_s: float | None = None
) -> Fit:
    """Fit a system's parameters to its runs (at least the 1-GPU one).

    `link_gb_s`: a link rate measured outside the runs (the link probe, ``dtfbench.results.netprobe``,
    or iperf between two nodes; GB/s). The runs alone cannot show a limit they never reached;
    with it, the bandwidth is the best fit at or below that rate (the runs may show a lower
    one), so the prediction past the runs meets the link where it will.
    """
    if link_gb_s is not None and not (isinstance(link_gb_s, (int, float)) and 0 < link_gb_s < math.inf):
        raise ModelError(f"link rate {link_gb_s!r}: give the measured rate in GB/s, a number > 0")
    t1, floor, evaluate, kinds = _prepare(observations, batch_size, variables)
    ring_fitted, asynchronous = kinds
    unlimited = evaluate(math.inf)
    chosen = unlimited
    notes: list[str] = []
    if link_gb_s is not None:
        top = max(float(link_gb_s), floor)
        if floor > link_gb_s:
            notes.append(
                f"the runs moved {floor:.3g} GB/s through one NIC, more than the link rate given "
                f"({link_gb_s:.3g} GB/s): using {floor:.3g}"
            )
        grid = np.geomspace(floor, top, BANDWIDTH_GRID_POINTS) if 0 < floor < top else np.array([top])
        # Equal fits: the highest rate (the link, when the runs never reached it).
        chosen = min((evaluate(float(bw)) for bw in grid), key=lambda r: (round(r[0], 12), -r[1]))
    elif floor > 0:
        grid = np.geomspace(floor, floor * BANDWIDTH_GRID_SPAN, BANDWIDTH_GRID_POINTS)
        # Equal fits (runs either well under the link or bound by it, none near the knee, leave
        # the rate and the per-GB cost trading off): the highest rate, the fewest assumptions.
        limited = min((evaluate(float(bw)) for bw in grid), key=lambda r: (round(r[0], 12), -r[1]))
        n, k = limited[4], len(FEATURES)
        aic = lambda rss, params: n * math.log(max(rss / n, NOISE**2)) + 2 * params  # noqa: E731
        if limited[3] > 0 and aic(limited[0], k + 1) < aic(unlimited[0], k):
            chosen = limited
        else:
            notes.append(f"no network limit seen in these runs (the link carried at least {floor:.3g} GB/s)")
    else:
        notes.append("no multi-node run: the network is not fitted")
    if not ring_fitted:
        notes.append(
            f"no multi-node {ALL_REDUCE} run: its per-hop cost is not fitted (0), so its predictions "
            "are its byte and barrier costs only, an upper bound on its rate; measure it on 2+ nodes"
        )
    if asynchronous and chosen is not unlimited:
        notes.append(
            "asynchronous PS workers: past the network onset the prediction has their pulls and "
            "pushes take random turns on the PS's link (it idles when all pull at once); in perfect "
            "order they would reach the fluid bound, max(compute, transfer)"
        )
    return _as_fit(chosen, t1, floor, batch_size, variables, notes, kinds)


def link_fits(observations: Sequence[Observation], batch_size: int, variables: Variables) -> list[Fit]:
    """The fits at every link rate the runs cannot rule out, lowest rate first (the last: no limit).

    A rate is ruled out when its fit's rms relative error is above the run-to-run noise
    (``NOISE``) and above the best fit's: between the rate the busiest NIC was seen to carry and
    no limit at all, the runs before a network onset fit many rates equally well, and a
    prediction past them is one of this range's (docs/scaling_model.md). No multi-node run:
    the one fit with no limit.
    """
    t1, floor, evaluate, kinds = _prepare(observations, batch_size, variables)
    candidates = [evaluate(math.inf)]
    if floor > 0:
        grid = np.geomspace(floor, floor * BANDWIDTH_GRID_SPAN, BANDWIDTH_GRID_POINTS)
        candidates = [evaluate(float(bw)) for bw in grid] + candidates
    best = min(c[0] / c[4] for c in candidates)
    allowed = max(NOISE**2, best)
    return [_as_fit(c, t1, floor, batch_size, variables, [], kinds) for c in candidates if c[0] / c[4] <= allowed]


# ---------------------------------------------------------------------------------------
# The baseline of the validation: the Optimus form (Peng et al., EuroSys 2018).
# ---------------------------------------------------------------------------------------


def optimus_features(config: Config) -> list[float]:
    """step = b + c*w/p + d*w + e*p, w worker nodes, p PSs."""
    w, p = config.nodes, config.num_ps
    return [1.0, w / p if p else 0.0, float(w), float(p)]


@dataclass
class OptimusFit:
    coefficients: np.ndarray
    batch_size: int

    def images_per_sec(self, config: Config) -> float:
        step = float(np.dot(optimus_features(config), self.coefficients))
        return config.gpus * self.batch_size / step if step > 0 else math.inf


def fit_optimus(observations: Sequence[Observation], batch_size: int) -> OptimusFit:
    """The Optimus form fitted by NNLS on step time."""
    A = np.array([optimus_features(o.config) for o in observations])
    y = np.array([o.config.gpus * batch_size / o.images_per_sec for o in observations])
    return OptimusFit(_nnls(A, y), batch_size)


def observations_from_rows(rows: Iterable[Mapping[str, Any]], gpus_per_node: int | None = None) -> list[Observation]:
    """Observations from published rows (nodes, gpus_per_node) or store summaries (hosts, workers)."""
    result = []
    for r in rows:
        if r.get("images_per_sec") is None or r.get("variable_update") not in VARIABLE_UPDATES:
            continue
        gpus = int(r["gpus"])
        nodes = r.get("nodes") or (len(r["hosts"]) if r.get("hosts") else None) or r.get("num_workers") or 1
        per_node = gpus_per_node or r.get("gpus_per_node") or max(1, math.ceil(gpus / int(nodes)))
        placed = r.get("ps_on_worker_nodes")
        synchronous = r.get("cross_replica_sync")  # None: not recorded (the published tables: synchronous)
        result.append(
            Observation(
                Config(
                    gpus=gpus,
                    gpus_per_node=per_node,
                    num_ps=0 if r["variable_update"] == ALL_REDUCE else int(r.get("num_ps") or 1),
                    variable_update=r["variable_update"],
                    ps_on_worker_nodes=True if placed is None else bool(placed),
                    synchronous=True if synchronous is None else bool(synchronous),
                ),
                float(r["images_per_sec"]),
            )
        )
    return result
