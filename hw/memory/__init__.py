"""The memory side of the core: on-chip SRAM, the DRAM controller and the clients that stream from DRAM.

``sram`` (banked SRAM behind arbitrated ports), ``dram`` (DRAM organisation and
timing, loaded from ``hw/configs/*.toml``), ``address_map`` (byte address <-> DRAM
coordinate), ``rank_scheduler`` (DDR4 command scheduler of one rank), ``controller``
(host/NDP arbitration, one scheduler per rank), ``system`` (controller + host
pass-through across clocks), ``port`` (the memory-client port, burst layouts, status
codes), ``weight_streamer`` and ``ring_column`` (GEMV weight fetch), ``dma`` (DRAM <-> SRAM).

May import: ``ndpdimm.hw`` only.
"""
