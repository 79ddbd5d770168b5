"""What a sweep costs in dollars, and the guard that refuses one above ``max_cost_usd``.

Prices come from a dated table in the package (``price_data/aws_ec2_on_demand.csv``:
instance_type, region, usd_per_hour, as_of), which a file of the same columns overrides
type by type (``DTFBENCH_PRICE_FILE``, or ``price_file=``), or one figure for every
instance (``usd_per_hour=``; the playbooks' ``price_usd_per_hour``).

    cost_usd = instances x hours x usd_per_hour

``check_max_cost(cost, max_cost_usd)`` is what the playbooks call before anything is
launched (``max_cost_usd``, default ``DEFAULT_MAX_COST_USD``): above it, one error naming
the figure and the variable to raise. Pure standard library (Ansible can carry it as
module_utils).
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

PRICE_FILE = "aws_ec2_on_demand.csv"
PRICE_FILE_ENV = "DTFBENCH_PRICE_FILE"
# A sweep predicted above this refuses to start unless max_cost_usd is raised.
DEFAULT_MAX_COST_USD = 100.0
COLUMNS = ("instance_type", "region", "usd_per_hour", "as_of")


class PriceError(ValueError):
    """A price that cannot be used: unknown instance type, a bad figure, a bad file."""


class CostLimitError(ValueError):
    """A sweep predicted to cost more than max_cost_usd."""


@dataclass(frozen=True)
class Price:
    instance_type: str
    usd_per_hour: float
    as_of: str
    source: str


def check_price(value, where: str) -> float:
    """A price of one instance-hour: a finite number above 0 (a price of 0 makes every sweep free,
    so the dollar guard would pass anything)."""
    try:
        figure = float(value)
    except (TypeError, ValueError):
        raise PriceError(f"{where}: price {value!r} is not a number of USD per hour") from None
    if not math.isfinite(figure) or figure <= 0:
        raise PriceError(f"{where}: price {value!r} must be a number above 0 (USD per instance-hour)")
    return figure


def parse_prices(text: str, source: str) -> dict[str, Price]:
    """The rows of a price file ('#' lines are comments); one error names the file and line."""
    lines = [
        (i, line) for i, line in enumerate(text.splitlines(), 1) if line.strip() and not line.lstrip().startswith("#")
    ]
    if not lines:
        raise PriceError(f"{source}: no prices (expected a header {','.join(COLUMNS)} and rows)")
    reader = csv.reader(io.StringIO("\n".join(line for _, line in lines)))
    header = [h.strip() for h in next(reader)]
    missing = [c for c in ("instance_type", "usd_per_hour") if c not in header]
    if missing:
        raise PriceError(f"{source}: header lacks {', '.join(missing)}; expected {','.join(COLUMNS)}")
    prices = {}
    for (lineno, _), values in zip(lines[1:], reader):
        row = dict(zip(header, (v.strip() for v in values)))
        name = row.get("instance_type", "")
        if not name:
            raise PriceError(f"{source} line {lineno}: no instance_type")
        prices[name] = Price(
            name,
            check_price(row.get("usd_per_hour"), f"{source} line {lineno} ({name})"),
            row.get("as_of", "") or "undated",
            source,
        )
    return prices


def load_prices(
    price_file: str | os.PathLike | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, Price]:
    """The packaged table, overridden by DTFBENCH_PRICE_FILE and then by `price_file`."""
    environ = os.environ if environ is None else environ
    packaged = (resources.files("dtfbench.forecast") / "price_data" / PRICE_FILE).read_text(encoding="utf-8")
    prices = parse_prices(packaged, f"dtfbench/forecast/price_data/{PRICE_FILE}")
    for path in (environ.get(PRICE_FILE_ENV), price_file):
        if path:
            file = Path(path)
            if not file.is_file():
                raise PriceError(
                    f"price file {file} does not exist (from "
                    f"{'DTFBENCH_PRICE_FILE' if path != price_file else 'price_file'})"
                )
            prices.update(parse_prices(file.read_text(encoding="utf-8"), str(file)))
    return prices


def price_for(
    instance_type: str, prices: Mapping[str, Price] | None = None, usd_per_hour: float | str | None = None
) -> Price:
    """The price of one instance-hour of `instance_type` (or the figure given for every instance)."""
    if usd_per_hour is not None:
        return Price(instance_type, check_price(usd_per_hour, "price_usd_per_hour"), "given", "price_usd_per_hour")
    table = load_prices() if prices is None else prices
    if instance_type not in table:
        raise PriceError(
            f"no price for instance type {instance_type!r} in the price table "
            f"(known: {', '.join(sorted(table))}); give one with price_usd_per_hour "
            f"(--price-usd-per-hour) or a price file ({PRICE_FILE_ENV}, --price-file)"
        )
    return table[instance_type]


def cost_usd(instances: int, hours: float, usd_per_hour: float) -> float:
    """instances x hours x price."""
    if instances < 0 or hours < 0:
        raise PriceError(f"instances={instances}, hours={hours}: both must be >= 0")
    return instances * hours * check_price(usd_per_hour, "usd_per_hour")


def check_max_cost(
    predicted_usd: float | None, max_cost_usd: float | str | None = None, what: str = "the planned sweep"
) -> None:
    """Refuse a sweep predicted above max_cost_usd (default DEFAULT_MAX_COST_USD), or one with no price."""
    limit = DEFAULT_MAX_COST_USD if max_cost_usd in (None, "") else max_cost_usd
    try:
        limit = float(limit)
    except (TypeError, ValueError):
        raise CostLimitError(f"max_cost_usd={max_cost_usd!r} is not a number of US dollars") from None
    if not math.isfinite(limit) or limit < 0:
        raise CostLimitError(f"max_cost_usd={max_cost_usd!r} must be a number >= 0 (US dollars)")
    if predicted_usd is None:
        raise CostLimitError(
            f"{what} has no predicted cost (no price for its instances); give "
            "price_usd_per_hour so that max_cost_usd can be checked"
        )
    if predicted_usd > limit:
        raise CostLimitError(
            f"{what} is predicted to cost ${predicted_usd:,.2f}, above max_cost_usd="
            f"${limit:,.2f}; raise it (-e max_cost_usd={math.ceil(predicted_usd)}) "
            "or plan a smaller sweep"
        )
