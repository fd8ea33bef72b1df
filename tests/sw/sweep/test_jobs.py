"""The scenario sweep jobs' rows (``sw/sweep/jobs.py``): every column a job's docstring promises
is written, read from the scenario's typed result."""

import pytest

from ndpdimm.sw.scenarios.hermes.config import SYSTEMS
from ndpdimm.sw.sweep.jobs import run_job

#: a Hermes point small enough for the fast suite (seconds on the model backend)
TINY = {"model": "llama2-13b", "tokens": 4, "prompt": 32, "profile_tokens": 8,
        "sample_layers": 1}


def test_the_hermes_job_writes_tokens_per_joule_for_every_system():
    """The job's docstring promises tokens/s, ms/step and tokens/J of every system. It read
    ``tokens_per_j`` while the result names it ``tokens_per_joule``: the column was never
    written and nothing failed."""
    out = run_job("hermes", TINY)
    assert out["status"] == "ok", out.get("error")
    row = out["result"]
    for name in SYSTEMS:
        for column in ("tokens_per_s", "ms_per_step", "tokens_per_j"):
            assert f"{name}_{column}" in row, f"{name}_{column} missing"
        assert row[f"{name}_tokens_per_j"] > 0
    # same point, same tokens/J: the column is the result's own figure
    from ndpdimm.sw.scenarios.base import RunContext
    from ndpdimm.sw.scenarios.hermes.config import HermesConfig
    from ndpdimm.sw.scenarios.hermes.scenario import run
    r = run(HermesConfig(**TINY), RunContext(log=None))
    assert row["hermes_tokens_per_j"] == pytest.approx(r.systems["hermes"].tokens_per_joule)
