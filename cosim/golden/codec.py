"""``LayoutCodec``: a ``data.StructLayout`` packed to and unpacked from a plain int, by its own field offsets.

One codec for every user of the RTL's payload layouts: the golden model's descriptor and
header decoding (``cosim/golden/core.py``), the calibration's descriptor fields
(``cosim/model/calibrate/measure.py``) and the cocotb benches' stream payloads
(``cosim/rtl/benches/``). Field positions come from the layout object that builds the RTL,
so they are written once. Much faster than building Amaranth constants per beat in a cocotb
loop.
"""

__all__ = ["LayoutCodec"]


class LayoutCodec:
    """Packs/unpacks a ``data.StructLayout`` as plain ints with the layout's own field offsets.

    ``encode`` masks each value to its field's width (a missing field is 0); ``decode`` gives
    every field as an unsigned int.
    """

    def __init__(self, layout):
        self.fields = {name: (f.offset, f.width) for name, f in layout}
        self.size = layout.size

    def encode(self, values: dict) -> int:
        bits = 0
        for name, (offset, width) in self.fields.items():
            bits |= (int(values.get(name, 0)) & ((1 << width) - 1)) << offset
        return bits

    def decode(self, bits: int) -> dict:
        return {name: (bits >> offset) & ((1 << width) - 1)
                for name, (offset, width) in self.fields.items()}
