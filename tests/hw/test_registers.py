"""The register map description: consistent, and the committed docs/registers.md is current."""

from pathlib import Path

import pytest

from ndpdimm.hw.registers import REGISTERS, Register, markdown, register

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
