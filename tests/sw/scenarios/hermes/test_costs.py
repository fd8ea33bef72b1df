"""The NDP cost of activated neurons through the driver API (``sw/scenarios/hermes/costs.py``)."""

import warnings

import pytest

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.scenarios.catalog import load_model


@pytest.fixture(scope="module")
def dimm():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the 256-unit model borrows a calibration
        return Dimm("model", CoreConfig(n_units=256), functional=False)


def test_cold_pool_is_a_dimms_count_in_a_layer():
    import numpy as np

    from ndpdimm.sw.scenarios.hermes.partition import cold_pool
    dimm = np.array([[0, 0, 1, -1, 1, 1],          # layer 0: DIMM 0 two, DIMM 1 three
                     [-1, -1, -1, 0, 1, -1]])      # layer 1: one each
    assert cold_pool(dimm, 2) == 2                 # counts 1, 1, 2, 3: the upper median
    assert cold_pool(np.full((2, 4), -1), 2) == 0


def test_with_neuron_pool_measures_the_line_again_within_the_pool():
    from ndpdimm.sw.scenarios.hermes.catalog import load_hardware
    from ndpdimm.sw.scenarios.hermes.config import HermesConfig
    from ndpdimm.sw.scenarios.hermes.costs import measure_costs, with_neuron_pool
    cfg = HermesConfig(model="llama2-7b")
    m = load_model(cfg.model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        costs = measure_costs(cfg, m, load_hardware(cfg.hardware))
        assert costs.neuron.pool == 1024                  # the largest sample by default
        small = with_neuron_pool(costs, cfg, m, 40)       # below the default samples
    assert small.neuron.pool == 40 and max(k for k, _ in small.neuron.samples) == 40
    assert small.dense is costs.dense and small.as_dict()["neuron"]["pool"] == 40
    assert with_neuron_pool(small, cfg, m, 40) is small
