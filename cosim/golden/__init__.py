"""Reference models the RTL must match bit for bit (docs/numerics.md is the contract).

``numerics`` (the torch golden model of the GEMV numerics, in the hardware's
reduction order), ``activation`` (the activation unit's approximations, bit-exact),
``act_program`` (expected status and SRAM image of ACT / SOFTMAX / ELTWISE
descriptors), ``core`` (functional reference of one core: completion codes and
memory images, used by the fuzzers and the model backend), ``codec`` (``LayoutCodec``: a
payload layout packed to and from an int, for the golden model and the benches).

May import: ``ndpdimm.hw``, ``cosim.golden``, ``cosim.gemv``, ``cosim.dram``, ``cosim.link`` and
cosim's top-level modules (``backend``, ``cache``, ...): never ``cosim.rtl`` or ``cosim.model``,
which build on it (``tests/test_layering.py``).
"""
