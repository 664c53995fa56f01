"""Shared test options: tests marked ``slow`` run only with ``--run-slow``; a one-thread torch fixture."""

import pytest


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", help="also run tests marked slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def one_torch_thread():
    """Small models gain nothing from threads, which spin on a busy machine: use with
    ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    from accessibility.models import torch_threads

    with torch_threads(1):
        yield
