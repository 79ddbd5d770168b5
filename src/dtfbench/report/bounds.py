"""What bounds a configuration's step, and where its time goes (docs/network.md, "The verdict").

Per configuration (a summary of ``dtfbench.report.stats``), from what was measured:

- ``step_time``: the measured step (s), the mean over the successful repetitions;
- ``compute_s``: the compute part, the step of the best 1-GPU configuration of the same
  system, workload, model, batch size and data (one device, no peer: nothing but compute);
- the busiest node's NIC rates (GB/s in and out over the workers' measured window, the
  store's ``nic_rx_gb_per_s``/``nic_tx_gb_per_s``) against the measured link rate
  (``link_gb_s``, point to point) and incast rate (``incast_gb_s``, N senders into one node);
- ``nic_share``: the busiest NIC's bytes, in and out, over the link rate: the share of the
  measured window the NIC needs to carry them one direction after the other. A worker pulls
  the variables, computes, then pushes the gradients, so on a link at its limit each
  direction is busy about half the time and in + out is what reaches the rate (the shaped
  test bed: 12 MB/s in and 12 MB/s out on a 25 MB/s link); above 100%, the directions overlap.
  A ring all-reduce (``collective_all_reduce``) sends and receives at once, each direction on
  its own half of the full-duplex link: its share is the busier direction over the rate;
- ``transfer_s``: the busiest NIC's bytes per step over the link rate, which is the step times
  that share (at most the step less compute); ``rest_s``: what is left (latency,
  synchronisation, the framework's fixed costs).

The verdict (``bound``), first rule that holds:

1. ``ps incast``: the busiest node's inbound rate is at least NEAR of the measured incast
   rate, and incast is a limit of its own (below INCAST_DISTINCT of the point-to-point rate);
2. ``network``: ``nic_share`` is at least NEAR;
3. ``compute``: the compute part is at least COMPUTE_SHARE of the step;
4. ``overheads``: neither (the NIC is known to be far from its rate, and the step is well
   above compute);
5. ``unknown``: without a link rate (or without NIC figures) network and overheads cannot be
   told apart; ``bound_why`` says what is missing.

``bound_why`` carries the numbers behind the verdict. Pure functions; no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from statistics import fmean
from typing import Any

# A NIC at or above this share of its measured rate is the limit (TCP over a shaped or switched
# link reaches 90-97% of what iperf3 reads; the counters add the headers that iperf3 leaves out).
NEAR = 0.8
# The compute part at or above this share of the step: more workers would not make it faster.
COMPUTE_SHARE = 0.8
# The incast rate is a limit apart from the link only when it is clearly below it.
INCAST_DISTINCT = 0.9

BOUNDS = ("compute", "network", "ps incast", "overheads", "unknown")
# What the per-configuration summary gains here (best_configurations copies them).
KEYS = (
    "step_time",
    "nic_rx_gb_per_s",
    "nic_tx_gb_per_s",
    "nic_busiest_host",
    "nic_runs",
    "nic_unknown",
    "link_gb_s",
    "incast_gb_s",
    "link_why",
    "nic_share",
    "incast_share",
    "compute_s",
    "transfer_s",
    "rest_s",
    "bound",
    "bound_why",
)


def _numbers(values: Iterable[Any]) -> list[float]:
    return [float(v) for v in values if isinstance(v, (int, float))]


def _mean(values: Iterable[Any]) -> float | None:
    found = _numbers(values)
    return fmean(found) if found else None


def _nic_unknown(rows: Sequence[Mapping[str, Any]]) -> str:
    """Why no run of a configuration has NIC figures: a host's own reason where one was stored."""
    for row in rows:
        figures = row.get("nic")
        if isinstance(figures, Mapping):
            for host, f in sorted(figures.items()):
                if isinstance(f, Mapping) and f.get("status") != "ok":
                    return f"{host}: {f.get('reason') or 'unknown'}"
    return "no NIC figures recorded (runs stored before the NIC sampler, or none succeeded)"


def measured(rows: Sequence[Mapping[str, Any]], ok: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A configuration's measured figures from its rows (``ok``: those that succeeded)."""
    with_nic = [r for r in ok if r.get("nic_rx_gb_per_s") is not None and r.get("nic_tx_gb_per_s") is not None]
    hosts = Counter(str(r["nic_busiest_host"]) for r in with_nic if r.get("nic_busiest_host"))
    links = _numbers(r.get("link_gb_s") for r in rows)
    incasts = _numbers(r.get("incast_gb_s") for r in rows)
    return {
        "step_time": _mean(r.get("step_time_mean") for r in ok),
        "nic_rx_gb_per_s": _mean(r["nic_rx_gb_per_s"] for r in with_nic),
        "nic_tx_gb_per_s": _mean(r["nic_tx_gb_per_s"] for r in with_nic),
        "nic_busiest_host": hosts.most_common(1)[0][0] if hosts else None,
        "nic_runs": len(with_nic),
        "nic_unknown": None if with_nic else _nic_unknown(rows),
        # The slowest measured link among the configuration's sweeps: the one that bounds it.
        "link_gb_s": min(links) if links else None,
        "incast_gb_s": min(incasts) if incasts else None,
        "link_why": None if links else next((str(r["link_why"]) for r in rows if r.get("link_why")), None),
    }


def _pct(share: float) -> str:
    return f"{share * 100:.0f}%"


def verdict(
    step: float | None,
    compute: float | None,
    rx: float | None,
    tx: float | None,
    link: float | None,
    incast: float | None,
    link_why: str | None = None,
    full_duplex: bool = False,
) -> dict[str, Any]:
    """The verdict and the split of one configuration's step; see the module's rules.

    step, compute: seconds; rx, tx: the busiest node's GB/s; link, incast: measured GB/s;
    full_duplex: the mode sends and receives at once (all-reduce), so the busier direction
    alone fills the link."""
    if rx is None or tx is None:
        busiest = None
    else:
        busiest = max(rx, tx) if full_duplex else rx + tx
    nic_share = busiest / link if busiest is not None and link else None
    incast_share = rx / incast if rx is not None and incast else None
    compute_share = compute / step if step and compute is not None else None
    out: dict[str, Any] = {"nic_share": nic_share, "incast_share": incast_share}
    if step:
        compute_part = min(compute, step) if compute is not None else None
        transfer = step * min(nic_share, 1.0) if nic_share is not None else None
        if transfer is not None and compute_part is not None:
            transfer = min(transfer, step - compute_part)
        rest = step - (compute_part or 0.0) - (transfer or 0.0) if compute_part is not None else None
        out.update(compute_s=compute_part, transfer_s=transfer, rest_s=rest)
    else:
        out.update(compute_s=None, transfer_s=None, rest_s=None)
    joined = "and, at once," if full_duplex else "+"
    nic_text = (
        f"busiest NIC {rx:.3g} GB/s in {joined} {tx:.3g} GB/s out" if busiest is not None else "no NIC figures"
    ) + (f" = {_pct(nic_share)} of the {link:.3g} GB/s link" if nic_share is not None else "")
    compute_text = (
        f"compute (1-GPU step) {compute:.3g} s = {_pct(compute_share)} of the {step:.3g} s step"
        if compute_share is not None
        else "no 1-GPU step to compare with"
    )
    incast_distinct = incast is not None and link is not None and incast < INCAST_DISTINCT * link
    if incast_share is not None and incast_distinct and incast_share >= NEAR:
        bound = "ps incast"
        why = f"busiest node receives {rx:.3g} GB/s = {_pct(incast_share)} of the {incast:.3g} GB/s incast rate"
    elif nic_share is not None and nic_share >= NEAR:
        bound, why = "network", f"{nic_text} (>= {_pct(NEAR)})"
    elif compute_share is not None and compute_share >= COMPUTE_SHARE:
        bound, why = "compute", f"{compute_text} (>= {_pct(COMPUTE_SHARE)})"
    elif nic_share is not None and compute_share is not None:
        bound = "overheads"
        why = f"{compute_text}; {nic_text}: the rest ({out['rest_s']:.3g} s) is neither"
    else:
        missing = "no NIC figures"
        if busiest is not None:
            missing = "no measured link rate" + (f" ({link_why})" if link_why else "")
        bound, why = "unknown", f"{compute_text}; {nic_text}; {missing}: network and overheads cannot be told apart"
    out.update(bound=bound, bound_why=why)
    return out


def add_bounds(summaries: list[dict[str, Any]], baseline_keys: Sequence[str]) -> None:
    """Set every summary's verdict and split, in place (after ``measured``'s fields are set).

    The compute part of a configuration is the step of the best (most images/sec) 1-GPU
    configuration with the same ``baseline_keys``."""
    compute: dict[tuple, tuple[float, float]] = {}
    for s in summaries:
        if s.get("gpus") == 1 and s.get("status") == "ok" and s.get("images_per_sec") and s.get("step_time"):
            key = tuple(s.get(k) for k in baseline_keys)
            if key not in compute or float(s["images_per_sec"]) > compute[key][0]:
                compute[key] = (float(s["images_per_sec"]), float(s["step_time"]))
    for s in summaries:
        baseline = compute.get(tuple(s.get(k) for k in baseline_keys))
        # No PS (all-reduce): nothing receives from every worker, so no incast verdict; its ring
        # sends and receives at once.
        all_reduce = s.get("variable_update") == "collective_all_reduce"
        has_ps = not all_reduce and int(s.get("num_ps") or 0) > 0
        s.update(
            verdict(
                s.get("step_time"),
                baseline[1] if baseline else None,
                s.get("nic_rx_gb_per_s"),
                s.get("nic_tx_gb_per_s"),
                s.get("link_gb_s"),
                s.get("incast_gb_s") if has_ps else None,
                s.get("link_why"),
                full_duplex=all_reduce,
            )
        )
        if s.get("status") != "ok":
            s.update(bound=None, bound_why="every run failed")
