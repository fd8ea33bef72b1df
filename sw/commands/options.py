"""Options more than one command declares, and the options generated from a configuration's fields.

**Options from a configuration dataclass.** A scenario's configuration
(``sw/scenarios/<name>/config.py``) is the one place its run parameters are declared: a field
that is also a command-line option carries what the option needs in
``dataclasses.field(metadata={...})``, and :func:`add_config_options` adds one option per field
a command names, :func:`config_from_args` makes the configuration from the parsed values. The
metadata keys (all optional):

* ``help``: the option's help text (absent: the option has none);
* ``option``: its name, when not ``--`` + the field's name with ``-`` for ``_``
  (``duration_s`` is ``--duration``);
* ``choices``: the values accepted (the scenario's own constants, ``PATTERNS``, ``MODES``, ...);
* ``metavar``: the placeholder in the help (default: the option's name in capitals, or its
  choices, as argparse makes it);
* ``positive``: the value must be > 0, refused when parsed (``positive_int`` for an int field,
  ``positive_float`` for a float one; ``cosim/arguments.py``); any other float field's option
  refuses NaN and infinity (``finite_float``);
* ``const``: the option is a flag that sets the field to this value (``--cold-int8`` sets
  ``cold_dtype`` to ``"int8"``);
* ``builtins``: the folder of ``sw/configs/`` whose files the value may name: the help lists
  the built-in names (an installed user has no source tree to look in);
* ``option_default``: the option's default when it is not the field's: ``None`` is "not given",
  the configuration then keeps its field's default (RAPID's ``--rate-scale``, which ``--trace``
  refuses only when it is given).

The option's type comes from the field's annotation (``int``, ``float``, ``str``; ``X | None``
as ``X``): a ``bool`` field is a flag (``--no-<name>`` when its default is True), a ``tuple``
field a comma-separated list whose default (``None``) is the field's default. A value the
option leaves ``None`` is not passed to the configuration, which then takes its field's default.

Other options that several commands share: ``--timeline FILE`` (:func:`add_timeline`,
checked before any work by :func:`check_timeline`) and the sampled RTL co-simulation of a
scenario run (:func:`add_rtl_samples`, ``--rtl-samples``, ``--rtl-seed``, ``--rtl-workers``).
A run that needs the RTL of a core whose harness is not in the build cache says so before it
starts, with the build's expected time (:func:`announce_rtl_build`).
"""

import argparse
import dataclasses
import sys
import types
import typing

from ndpdimm.cosim.arguments import finite_float, non_negative_int, positive_float, positive_int

__all__ = ["add_config_options", "config_from_args", "add_timeline", "check_timeline",
           "add_rtl_samples", "rtl_sample_kwargs", "announce_rtl_build", "build_time"]


def _field_type(cls, field: dataclasses.Field) -> type:
    """The type a field holds, ``X`` for ``X | None``."""
    hint = typing.get_type_hints(cls)[field.name]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    return typing.get_origin(hint) or hint


def _fields(cls) -> dict:
    return {f.name: f for f in dataclasses.fields(cls)}


def add_config_options(parser: argparse.ArgumentParser, cls, names) -> None:
    """One option per field of the dataclass ``cls`` named in ``names``, in that order (see the
    module docstring); its dest is the field's name."""
    fields = _fields(cls)
    for name in names:
        f, meta = fields[name], fields[name].metadata
        kind = _field_type(cls, f)
        default = meta.get("option_default", f.default)
        kw = {"dest": name, "help": meta.get("help")}
        if "builtins" in meta:
            from ndpdimm.sw.scenarios.catalog import available_names
            kw["help"] += f"; built in: {', '.join(available_names(meta['builtins']))}"
        if "const" in meta:
            kw.update(action="store_const", const=meta["const"], default=default)
            option = meta["option"]
        elif kind is bool:
            kw.update(action="store_false" if f.default else "store_true", default=f.default)
            option = meta.get("option", f"--{'no-' if f.default else ''}{name.replace('_', '-')}")
        else:
            option = meta.get("option", f"--{name.replace('_', '-')}")
            if kind is tuple:
                default = meta.get("option_default")
            elif meta.get("positive"):
                kw["type"] = {int: positive_int, float: positive_float}[kind]
            elif kind in (int, float):
                kw["type"] = {int: int, float: finite_float}[kind]
            kw.update(default=default, choices=meta.get("choices"), metavar=meta.get("metavar"))
            derived = option[2:].replace("-", "_")
            if kw["metavar"] is None and derived != name and "choices" not in meta:
                kw["metavar"] = derived.upper()        # what argparse shows for the option's dest
        parser.add_argument(option, **kw)


def config_from_args(cls, args: argparse.Namespace, names, **given):
    """``cls`` made of the parsed values of the options :func:`add_config_options` added for
    ``names`` (a ``None`` value: the field's default; a tuple field's list split at commas) and
    the fields in ``given``; a bad value raises the configuration's ``ValueError``."""
    fields = _fields(cls)
    for name in names:
        value = getattr(args, name)
        if value is not None and _field_type(cls, fields[name]) is tuple:
            value = tuple(value.split(","))
        if value is not None:
            given.setdefault(name, value)
    return cls(**given)


def add_timeline(parser: argparse.ArgumentParser, what: str) -> None:
    """``--timeline FILE``: also write ``what`` as a Chrome-trace/Perfetto timeline."""
    parser.add_argument("--timeline", default=None, metavar="FILE",
                        help=f"also write {what} as a Chrome-trace/Perfetto JSON timeline "
                             "(open it at https://ui.perfetto.dev); its folder must exist")


def check_timeline(args: argparse.Namespace) -> None:
    """A bad ``--timeline`` path is a ``ValueError`` before the run starts (nothing is written)."""
    if getattr(args, "timeline", None) is not None:
        from ndpdimm.cosim.timeline import check_timeline_path
        check_timeline_path(args.timeline)


def add_rtl_samples(parser: argparse.ArgumentParser) -> None:
    """Sampled RTL co-simulation of a scenario run (``sw/sampling/``)."""
    parser.add_argument("--rtl-samples", type=non_negative_int, default=0, metavar="N",
                        help="replay N of the run's NDP kernel invocations (stratified by kind) on "
                             "the RTL of the same core and print the RTL/model ratio with 95 %% "
                             "intervals beside the model's NDP time (default 0: none; the first "
                             "use of a core builds its harness: minutes at 16 units, 12+ at 256)")
    parser.add_argument("--rtl-seed", type=int, default=0, help="seed of the sample (default 0)")
    parser.add_argument("--rtl-workers", type=non_negative_int, default=2,
                        help="Dask worker processes for the replays (default 2; 0: in this process)")
    parser.add_argument("--rtl-sub-cycles", type=positive_float, default=None, metavar="C",
                        help="replay a random subset of an invocation's groups (neurons, rows, "
                             "passes) worth about C charged cycles, after a warm-up group, and "
                             "scale it by the model (default: whole invocations; docs/cosim.md)")
    parser.add_argument("--rtl-warmup", type=non_negative_int, default=1, metavar="W",
                        help="warm-up groups before a sub-sample (default 1)")
    parser.add_argument("--rtl-full", type=non_negative_int, default=None, metavar="N",
                        help="per kind, N sub-sampled draws also replayed whole: the sub-sample's "
                             "correction and its variance (default 3 with --rtl-sub-cycles)")
    parser.add_argument("--rtl-model-draws", type=non_negative_int, default=0, metavar="N",
                        help="per kind, N draws on the timing-only model backend (about a second "
                             "each) carrying the cost lines' spread (default 0: the RTL draws only)")
    parser.add_argument("--rtl-correction", default=None, metavar="FILE",
                        help="with --rtl-full 0: take each sub-sampled kind's correction from a "
                             "sampling benchmark file's coverage section (e.g. "
                             "bench/results/sampling.json) instead of the run's own whole replays")
    # the allocations of sw/sampling/stats.py (ALLOCATIONS; not imported: parsing stays light)
    parser.add_argument("--rtl-allocation", choices=("proportional", "neyman"), default="proportional",
                        help="share the RTL draws among kinds by charged cycles (default) or by "
                             "Neyman's rule from a pilot of two draws per kind")


def rtl_sample_kwargs(args: argparse.Namespace) -> dict:
    """The ``rtl_samples``, ``rtl_seed``, ``rtl_workers`` and ``rtl_design`` of
    :func:`add_rtl_samples`' options (a bad combination: ``ValueError``)."""
    from ndpdimm.sw.sampling.stats import Design, stored_corrections
    correction = stored_corrections(args.rtl_correction) if args.rtl_correction else None
    full = args.rtl_full if args.rtl_full is not None else \
        (3 if args.rtl_sub_cycles and correction is None else 0)
    design = Design(sub_cycles=args.rtl_sub_cycles, warmup=args.rtl_warmup, full=full,
                    model_draws=args.rtl_model_draws, allocation=args.rtl_allocation,
                    correction=correction)
    return {"rtl_samples": args.rtl_samples, "rtl_seed": args.rtl_seed,
            "rtl_workers": args.rtl_workers, "rtl_design": design}


def build_time(units: int) -> str:
    """The expected time of a core's first harness build, as measured on this project's 2-core
    machines (docs/cosim.md: 12-15 minutes at 256 units; about 2 minutes at 16)."""
    if units >= 256:
        return "12-15 minutes or more"
    if units > 16:
        return "several minutes"
    return "a few minutes"


def announce_rtl_build(command: str, core, needs_rtl: bool) -> str | None:
    """If ``needs_rtl`` (``--backend rtl`` or ``--rtl-samples``) and the harness of ``core`` (a
    :class:`~ndpdimm.cosim.backend.CoreConfig`) is not in the build cache, print on stderr,
    before the run starts, that it is built first and how long that takes; returns the line."""
    if not needs_rtl:
        return None
    from ndpdimm.cosim.rtl.harness_build import default_build_root, harness_built
    if harness_built(core):
        return None
    line = (f"ndpdimm {command}: note: the RTL of this core ({core.n_units} GEMV units, "
            f"{core.act_lanes} activation lanes) is not built yet: the run first builds its "
            f"Verilated harness, {build_time(core.n_units)}, kept in {default_build_root()} "
            "for later runs")
    print(line, file=sys.stderr, flush=True)
    return line
