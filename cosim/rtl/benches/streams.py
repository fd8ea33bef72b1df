"""Stream driver, reset and stats file shared by the cocotb benches (one place, not copied per bench).

The payload codec the benches use, ``LayoutCodec``, lives in ``cosim/golden/codec.py``: the
golden model decodes descriptors with it too.

Benches drive at the falling clock edge and sample in the ReadOnly phase that
follows; ``StreamSource.drive`` is the falling-edge half, ``accepted`` is
called by the bench when it saw ``valid & ready`` in ReadOnly.
"""

__all__ = ["StreamSource", "reset", "merge_stats"]

import json


class StreamSource:
    """Driver: presents items one by one, with random idle cycles between them."""

    def __init__(self, valid, payload, items, rng, idle_prob):
        self.valid, self.payload = valid, payload
        self.items, self.next = list(items), 0
        self.rng, self.idle_prob = rng, idle_prob
        self.holding = False

    def drive(self):
        if not self.holding and self.next < len(self.items) and self.rng.random() >= self.idle_prob:
            self.payload.value = self.items[self.next]
            self.holding = True
        self.valid.value = int(self.holding)

    def accepted(self):
        self.holding = False
        self.next += 1

    @property
    def exhausted(self):
        return self.next == len(self.items)


async def reset(dut, idle_signals, cycles=3):
    """Hold ``rst`` for ``cycles`` clock edges with every handshake signal in ``idle_signals`` low."""
    from cocotb.triggers import RisingEdge
    for sig in idle_signals:
        sig.value = 0
    dut.rst.value = 1
    for _ in range(cycles):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


def merge_stats(path, test_name, entry) -> None:
    """Add ``entry`` under ``test_name`` to the JSON file ``path`` (created if missing; a
    bench run with several tests fills one file). ``path`` None or empty: do nothing."""
    if not path:
        return
    try:
        with open(path) as f:
            doc = json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        doc = {}
    doc[test_name] = entry
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
