"""The GEMV engine: bit-serial multiplier units, their lane reducers, and what feeds them.

``engine`` (``GemvEngine``: ``n_units`` units and their control), ``unit`` (one
replicable multiplier + reducer), ``multiplier`` (the bit-serial multiplier unit),
``sequencer`` (what all units share: activation words, operand decode, step control),
``lane_reducer`` and ``fp32_arith`` (FP32/INT32 accumulation in the documented
order), ``activation_feeder`` (SRAM -> the engine's activation stream),
``result_writer`` (result beats -> SRAM, with accumulate), ``datapath`` (the engine fed
from DRAM through the memory side, a test and demo top).

May import: ``ndpdimm.hw`` only.
"""
