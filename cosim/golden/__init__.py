"""Reference models the RTL must match bit for bit (docs/numerics.md is the contract).

``numerics`` (the torch golden model of the GEMV numerics, in the hardware's
reduction order), ``activation`` (the activation unit's approximations, bit-exact),
``act_program`` (expected status and SRAM image of ACT / SOFTMAX / ELTWISE
descriptors), ``core`` (functional reference of one core: completion codes and
memory images, used by the fuzzers and the model backend).

May import: ``ndpdimm.hw`` and ``ndpdimm.cosim``.
"""
