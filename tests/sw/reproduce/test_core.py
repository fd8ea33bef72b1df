"""The reproduction core: the +-25 % rule, the checks, and the files ``write_outputs`` writes."""

import json
import math

import pytest

from ndpdimm.sw.reproduce.core import (
    Figure,
    Reproduction,
    ReproductionError,
    SensitivityBar,
    check_figures,
    format_table,
    one_at_a_time,
    write_outputs,
)
from ndpdimm.sw.reproduce.params import load_params, values

PARAMS = """
[meta]
what = "a closed-form toy: throughput = bandwidth / bytes"

[bandwidth_gbps]
value = 25.0
source = "PCIe 4.0 x16 spec, 32 GB/s raw, ~25 GB/s effective"
range = { low = 20.0, high = 28.0, source = "measured host-to-device copies, 20-28 GB/s" }

[bytes_gb]
value = 140.0
source = "LLaMA2-70B FP16 weights: 70e9 x 2 B"
range = { low = 70.0, high = 140.0, source = "INT8 to FP16 weights" }

[label]
value = "toy"
source = "this test"
"""


def _throughput(params, overrides=None) -> float:
    v = values(params, overrides)
    return v["bandwidth_gbps"] / v["bytes_gb"]


def _reproduction(tmp_path) -> Reproduction:
    (tmp_path / "toy.toml").write_text(PARAMS)
    params = load_params(tmp_path / "toy.toml")
    ours = _throughput(params)
    figures = [
        Figure("tps", "decode tokens/s", "tokens/s", published=0.2, published_source="Toy Fig. 1",
               ours=ours),
        Figure("speedup", "speed-up over baseline", "x", published=10.0, published_source="Toy Sec. 5",
               ours=3.0, explanation="our baseline streams weights at full PCIe bandwidth"),
        Figure("power", "node power", "W", published=500.0, published_source="Toy Table 2", ours=None,
               explanation="no power model for this toy"),
    ]
    bars = one_at_a_time(params, ["bandwidth_gbps", "bytes_gb"], lambda o: _throughput(params, o))
    curve = {"x_label": "bandwidth (GB/s)", "y_label": "tokens/s",
             "series": {"ours": [[b, b / 140.0] for b in (20.0, 25.0, 28.0)]},
             "marks": {"published": {"y": 0.2}, "default": {"x": 25.0}}}
    return Reproduction(paper="toy", title="Toy reproduction", reference="Toy, arXiv 0000.00000",
                        setup={"model": "toy", "bandwidth_gbps": 25.0}, figures=figures,
                        sensitivity={"tps": bars}, curves={"tps_vs_bandwidth": curve},
                        notes=["a toy, for the test"])


def test_ratio_and_band():
    f = Figure("a", "a", "x", published=4.0, published_source="s", ours=5.0)
    assert f.ratio == pytest.approx(1.25)
    assert f.within()
    assert not Figure("a", "a", "x", published=4.0, published_source="s", ours=5.01).within()
    assert not Figure("a", "a", "x", published=4.0, published_source="s", ours=2.99).within()
    assert Figure("a", "a", "x", published=4.0, published_source="s", ours=None).ratio is None


@pytest.mark.parametrize("ours", [5.2, 2.0, None])
def test_out_of_band_figure_without_explanation_is_rejected(ours, tmp_path):
    rep = _reproduction(tmp_path)
    rep.figures.append(Figure("bad", "an unexplained figure", "x", published=4.0,
                              published_source="Toy Fig. 3", ours=ours))
    with pytest.raises(ReproductionError, match="'bad'.*no explanation"):
        check_figures(rep)
    out = tmp_path / "out"
    with pytest.raises(ReproductionError, match="'bad'"):
        write_outputs(rep, out)
    assert not out.exists(), "a rejected reproduction must write nothing"


def test_in_band_figure_needs_no_explanation(tmp_path):
    rep = _reproduction(tmp_path)
    rep.figures.append(Figure("ok", "close", "x", published=4.0, published_source="Toy", ours=4.9))
    check_figures(rep)


@pytest.mark.parametrize("change, message", [
    (lambda r: r.figures.append(r.figures[0]), "appears twice"),
    (lambda r: r.figures.append(Figure("z", "z", "x", 0.0, "s", 1.0, "e")), "non-zero"),
    (lambda r: r.figures.append(Figure("z", "z", "x", 1.0, " ", 1.0)), "no published_source"),
    (lambda r: r.figures.append(Figure("z", "z", "x", 1.0, "s", math.nan, "e")), "not a finite"),
    (lambda r: r.sensitivity.update(nope=[]), "not a figure"),
    (lambda r: r.sensitivity["tps"].append(SensitivityBar("p", 1, 2, 1.5, "", 0.1, 0.2)), "no source"),
    (lambda r: r.curves.update(c={"x_label": "x", "series": {}}), "lacks 'y_label'"),
])
def test_bad_reproduction_is_rejected(change, message, tmp_path):
    rep = _reproduction(tmp_path)
    change(rep)
    with pytest.raises(ReproductionError, match=message):
        check_figures(rep)


def test_write_outputs_writes_json_markdown_and_plots(tmp_path):
    rep = _reproduction(tmp_path)
    files = write_outputs(rep, tmp_path / "out")
    names = sorted(f.name for f in files)
    assert names == sorted(["toy.json", "toy.md", "toy.png", "toy_tornado_tps.png",
                            "toy_tps_vs_bandwidth.png"])
    for f in files:
        assert f.is_file() and f.stat().st_size > 0
        if f.suffix == ".png":
            assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = json.loads((tmp_path / "out" / "toy.json").read_text())
    by_key = {f["key"]: f for f in data["figures"]}
    assert by_key["tps"]["ratio"] == pytest.approx((25.0 / 140.0) / 0.2)
    assert by_key["tps"]["within_25pct"] and not by_key["speedup"]["within_25pct"]
    assert by_key["power"]["ours"] is None and by_key["power"]["ratio"] is None
    # the tornado: each parameter moved alone, the headline recomputed at each end
    bars = {b["parameter"]: b for b in data["sensitivity"]["tps"]}
    assert bars["bandwidth_gbps"]["headline_at_low"] == pytest.approx(20.0 / 140.0)
    assert bars["bytes_gb"]["headline_at_low"] == pytest.approx(25.0 / 70.0)
    assert bars["bytes_gb"]["source"] == "INT8 to FP16 weights"
    md = (tmp_path / "out" / "toy.md").read_text()
    table = format_table(rep)
    assert table in md
    rows = [line for line in table.splitlines()[2:]]
    assert len(rows) == 3
    assert "| speed-up over baseline | x | 10 | Toy Sec. 5 | 3 | 0.30 **!** |" in rows[1]
    assert "our baseline streams weights" in rows[1]
    assert "a toy, for the test" in md and '"bandwidth_gbps": 25.0' in md


def test_output_folder_that_is_a_file_is_rejected(tmp_path):
    rep = _reproduction(tmp_path)
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(ReproductionError, match="is a file"):
        write_outputs(rep, target)
    assert target.read_text() == "x"


def test_sensitivity_needs_a_range(tmp_path):
    (tmp_path / "toy.toml").write_text(PARAMS)
    params = load_params(tmp_path / "toy.toml")
    with pytest.raises(ReproductionError, match="'label' has no range"):
        one_at_a_time(params, ["label"], lambda o: 0.0)
    with pytest.raises(ReproductionError, match="'nope' is not in the parameter file"):
        one_at_a_time(params, ["nope"], lambda o: 0.0)
