"""The test bed's fixtures (testbed_fixtures.py) for the tests in this folder."""

from testbed_fixtures import testbed4, testbed_factory  # noqa: F401
