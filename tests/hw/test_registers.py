"""The register map description: consistent, and the committed docs/registers.md is current."""

from pathlib import Path

import pytest

from ndpdimm.hw.core.ndp_core import core_caps
from ndpdimm.hw.registers import REGISTERS, Field, Register, markdown, register

DOC = Path(__file__).resolve().parents[2] / "docs" / "registers.md"


def test_doc_is_generated_from_the_description():
    assert DOC.read_text() == markdown(), \
        "docs/registers.md is stale: run python -m ndpdimm.hw.registers > docs/registers.md"


def test_lookup_and_layout():
    assert register("DESC_PUSH").access == "w1"
    assert register("WINDOW_BASE").privileged and register("WINDOW_LIMIT").privileged
    assert len({r.offset for r in REGISTERS}) == len(REGISTERS)
    with pytest.raises(KeyError, match="NOPE"):
        register("NOPE")


@pytest.mark.parametrize("kw,needle", [({"access": "rx"}, "access"), ({"offset": 4}, "aligned")])
def test_bad_register_definition(kw, needle):
    args = {"name": "X", "offset": 0x800, "access": "rw", "doc": "x", **kw}
    with pytest.raises(ValueError, match=needle):
        Register(**args)


def test_fields_cover_what_the_core_reports():
    caps = register("CAPS")
    word = core_caps(256, 131072, 4, 16, act_lanes=256, link=True)
    assert caps.unpack(word) == {"UNITS": 256, "SRAM_LOG2": 17, "RANKS": 4, "MAX_BATCH": 16,
                                 "ACT_LANES": 256, "LINK": 1}
    assert caps.pack(**caps.unpack(word)) == word
    assert register("POLICY").field("ARBITRATION").get(register("POLICY").reset) == 2
    assert register("CYCLES").whole and register("CYCLES").fields[0].width == 64
    assert not register("STATUS").whole
    # a field inherits its register's access
    assert {f.access for f in register("CQ_HEAD").fields} == {"ro"}
    with pytest.raises(KeyError, match="no field 'NOPE'.*BUSY"):
        register("STATUS").field("NOPE")
    with pytest.raises(ValueError, match="MY_ID is 4 bits: 16 does not fit"):
        register("LINK_ID").pack(MY_ID=16)
    with pytest.raises(ValueError, match="ACT_LANES is 12 bits: 4096"):
        core_caps(256, 131072, 4, 16, act_lanes=4096)


def test_every_register_is_fully_described():
    """Fields in bit order inside 64 bits, each with a doc (unless it is the whole register)."""
    for r in REGISTERS:
        assert r.doc, r.name
        assert all(f.doc for f in r.fields) or r.whole, r.name
        assert [f.lsb for f in r.fields] == sorted(f.lsb for f in r.fields), r.name


@pytest.mark.parametrize("fields,reset,needle", [
    ((Field("A", 0, 4, "a"), Field("B", 3, 2, "b")), 0, r"field 'B': bits \[4:3\] overlap field 'A'"),
    ((Field("A", 60, 8, "a"),), 0, r"field 'A': bits \[67:60\] go past bit 63"),
    ((Field("A", 0, 1, "a"), Field("A", 1, 1, "a")), 0, "field 'A': duplicate field name"),
    ((Field("a", 0, 1, "a"),), 0, "field 'a': a field name must be an upper-case identifier"),
    ((Field("A", 0, 0, "a"),), 0, "lsb must be >= 0 and width >= 1"),
    ((Field("A", 0, 1, "a", access="rx"),), 0, "access must be one of"),
    ((Field("A", 0, 2, "a"),), 0x4, r"reset 0x4 sets bits outside its fields \(0x4\)"),
    ((), 1 << 64, "is not a 64-bit value"),
])
def test_bad_field_definition(fields, reset, needle):
    with pytest.raises(ValueError, match=needle):
        Register("X", 0x800, "rw", "x", reset=reset, fields=fields)
