"""Golden model, Verilator/cocotb build-and-run, reference models and benches."""
