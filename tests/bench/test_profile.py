"""``bench/profile.py``: giving Verilated functions to the core's blocks, and the report parser
(the perf run itself is the benchmark, not a test)."""

from ndpdimm.bench import profile

_CPP = """// Verilated model, trimmed
#include "Vtop.h"

void Vtop___024root___nba_comb__TOP__1(Vtop___024root* vlSelf) {
    vlSelfRef.ndp_harness_top__DOT__core__DOT__streamer__DOT__ring_valid_0 = 1;
    vlSelfRef.ndp_harness_top__DOT__core__DOT__streamer__DOT__ring_valid_1 = 1;
    vlSelfRef.ndp_harness_top__DOT__core__DOT__engine__DOT__busy = 0;
}

VL_ATTR_COLD void Vtop___024root___nba_sequent__TOP__0(Vtop___024root* vlSelf) {
    vlSelfRef.ndp_harness_top__DOT__core__DOT__engine__DOT__u0__DOT__dp0 = 3;
}

void Vtop___024root___ico_sequent__TOP__0(Vtop___024root* vlSelf) {
    vlSelfRef.ndp_harness_top__DOT__rst_q = 0;
    vlSelfRef.ndp_harness_top__DOT__dram_rst_q = 0;
    vlSelfRef.ndp_harness_top__DOT__core__DOT__sram__DOT__x = 0;
}

void Vtop___024root___eval_triggers(Vtop___024root* vlSelf) {
    vlSelfRef.__VnbaTriggered = 1;
}
"""


def test_functions_go_to_the_block_they_name_most(tmp_path):
    (tmp_path / "Vtop___024root__0.cpp").write_text(_CPP)
    (tmp_path / "unrelated.cpp").write_text("void Vtop___024root___other() {}\n")
    # another file declares and calls a function defined above: not its body
    (tmp_path / "Vtop___024root__9.cpp").write_text(
        "\nvoid Vtop___024root___nba_comb__TOP__1(Vtop___024root* vlSelf);\n"
        "\nvoid Vtop___024root___eval_nba(Vtop___024root* vlSelf) {\n"
        "    Vtop___024root___nba_comb__TOP__1(vlSelf);\n}\n")
    bodies = profile.function_bodies(tmp_path)
    assert set(bodies) == {"Vtop___024root___nba_comb__TOP__1",
                           "Vtop___024root___nba_sequent__TOP__0",
                           "Vtop___024root___ico_sequent__TOP__0",
                           "Vtop___024root___eval_triggers", "Vtop___024root___eval_nba"}
    assert profile.block_of(bodies["Vtop___024root___nba_comb__TOP__1"]) == "streamer"
    assert profile.block_of(bodies["Vtop___024root___nba_sequent__TOP__0"]) == "engine"
    assert profile.block_of(bodies["Vtop___024root___ico_sequent__TOP__0"]) == "harness"
    assert profile.block_of(bodies["Vtop___024root___eval_triggers"]) == "model (no block named)"
    by_block, rows = profile.attribute(
        [(40.0, "Vtop___024root___nba_comb__TOP__1"), (30.0, "Vtop___024root___nba_sequent__TOP__0"),
         (20.0, "Vtop___024root___ico_sequent__TOP__0"), (6.0, "_PyEval_EvalFrameDefault"),
         (4.0, "VL_ASSIGN_W")], bodies)
    assert by_block == {"streamer": 40.0, "engine": 30.0, "harness": 20.0,
                        profile.OUTSIDE: 10.0}
    assert rows[3] == (6.0, "_PyEval_EvalFrameDefault", profile.OUTSIDE)


def test_report_lines_are_parsed(monkeypatch):
    report = """# Overhead  Symbol
#
     4.97%  [.] Vtop___024root___nba_comb__TOP__1
     0.27%  [k] clear_page_erms
     0.10%  [.] _PyEval_EvalFrameDefault

"""

    class Done:
        stdout = report
    monkeypatch.setattr(profile.subprocess, "run", lambda *a, **k: Done)
    assert profile.perf_symbols("unused") == [(4.97, "Vtop___024root___nba_comb__TOP__1"),
                                              (0.27, "clear_page_erms"),
                                              (0.10, "_PyEval_EvalFrameDefault")]


def test_a_bad_core_size_is_a_usage_error_before_any_run(capsys):
    import pytest
    with pytest.raises(SystemExit) as e:
        profile.main(["--units", "0", "--out", "unused.json"])
    assert e.value.code == 2 and "n_units" in capsys.readouterr().err
