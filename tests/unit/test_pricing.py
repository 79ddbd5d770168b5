"""dtfbench.forecast.pricing: the dated price table, its overrides, the cost, and the max_cost_usd guard."""

import pytest

from dtfbench.forecast import pricing
from dtfbench.plan import ec2_types


def test_packaged_table_is_dated_and_covers_every_known_type():
    prices = pricing.load_prices(environ={})
    assert prices["p2.xlarge"].usd_per_hour == 0.9 and prices["p2.8xlarge"].usd_per_hour == 7.2
    assert all(p.as_of[:4].isdigit() for p in prices.values())
    assert set(ec2_types.INSTANCE_TYPES) <= set(prices)


def test_a_file_overrides_type_by_type(tmp_path):
    own = tmp_path / "prices.csv"
    own.write_text(
        "# my negotiated prices\ninstance_type,region,usd_per_hour,as_of\n"
        "p2.xlarge,eu-west-1,0.972,2026-11-01\nx9.huge,eu-west-1,3.5,2026-11-01\n"
    )
    prices = pricing.load_prices(own, environ={})
    assert prices["p2.xlarge"].usd_per_hour == 0.972 and prices["p2.xlarge"].source == str(own)
    assert prices["x9.huge"].usd_per_hour == 3.5 and prices["p2.8xlarge"].usd_per_hour == 7.2
    # the same through the environment variable
    assert pricing.load_prices(environ={pricing.PRICE_FILE_ENV: str(own)})["x9.huge"].usd_per_hour == 3.5


def test_one_figure_for_every_instance():
    assert pricing.price_for("anything", {}, 2.5).usd_per_hour == 2.5
    assert pricing.cost_usd(4, 2.5, 0.9) == pytest.approx(9.0)


def test_unknown_type_without_a_price_is_one_clear_error():
    with pytest.raises(
        pricing.PriceError, match=r"no price for instance type 'x9.huge'.*price_usd_per_hour.*--price-file"
    ):
        pricing.price_for("x9.huge", pricing.load_prices(environ={}))


@pytest.mark.parametrize("bad", [-0.5, "-1", "abc", float("nan")])
def test_negative_or_bad_price_is_refused(bad):
    with pytest.raises(pricing.PriceError, match="price_usd_per_hour: price"):
        pricing.price_for("p2.xlarge", {}, bad)


def test_negative_price_in_a_file_names_file_and_line(tmp_path):
    own = tmp_path / "prices.csv"
    own.write_text("instance_type,usd_per_hour\np2.xlarge,0.9\np2.8xlarge,-7.2\n")
    with pytest.raises(
        pricing.PriceError, match=r"prices.csv line 3 \(p2.8xlarge\): price '-7.2' must be a number above 0"
    ):
        pricing.load_prices(own, environ={})
    with pytest.raises(pricing.PriceError, match="does not exist"):
        pricing.load_prices(tmp_path / "missing.csv", environ={})


def test_max_cost_guard():
    pricing.check_max_cost(99.0)  # under the default
    pricing.check_max_cost(500.0, 600)
    with pytest.raises(pricing.CostLimitError) as err:
        pricing.check_max_cost(19157.05, 100)
    message = str(err.value)
    assert "$19,157.05" in message and "max_cost_usd=$100.00" in message and "-e max_cost_usd=19158" in message
    with pytest.raises(pricing.CostLimitError, match="no predicted cost"):
        pricing.check_max_cost(None, 100)
    with pytest.raises(pricing.CostLimitError, match="not a number"):
        pricing.check_max_cost(1.0, "lots")
    with pytest.raises(pricing.CostLimitError, match=">= 0"):
        pricing.check_max_cost(1.0, -5)
