"""DIMM-Link: the packetised link between neighbouring DIMMs, and the relayout unit that uses it.

From the wire up: ``formats`` (parameters, 64b/66b blocks, flits, headers), ``lane``
(one serial lane), ``phy`` (lanes in lockstep, deskew, training), ``layer`` (frames,
CRC, ACK/NAK replay, credits), ``port`` (PHY + link layer: one end of a link),
``router`` (the DIMM's 3-port router), ``transaction`` (remote writes, reads, atomic
adds), ``relayout`` (striped <-> localized tensors without the host).

May import: ``ndpdimm.hw`` only.
"""
