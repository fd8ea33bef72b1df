"""The ``ndpdimm`` command line: a dispatcher over the commands of ``sw/commands/``.

Every command is a module listed in :data:`ndpdimm.sw.commands.COMMANDS` (its ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``; the package's docstring lists what each
runs). :func:`main` builds the parser from that registry, parses, checks ``--timeline`` before
any work, and returns the command's ``run`` status.

Only the command being run declares its options (``build_parser(declare=...)``): the scenarios'
options are made from their configuration dataclasses, whose modules take seconds to import
(torch), and ``ndpdimm --help`` or ``ndpdimm cache --path`` need none of them.

Exit statuses: 0 done; 1 a check failed (the command says which); 2 bad arguments, refused
before any simulation starts with a one-line reason: ``ndpdimm <command>: error: <reason>``, for
an unknown option or a bad value (argparse's reason, without its usage lines: ``--help`` shows
them) as for a ``ValueError`` the command raises.
"""

import argparse
import sys

from ndpdimm.sw.commands import COMMANDS, command
from ndpdimm.sw.commands.options import check_timeline

__all__ = ["build_parser", "main", "console_main"]


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose error is one line, ``<prog>: error: <reason>``, and exit 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(declare=None) -> argparse.ArgumentParser:
    """The ``ndpdimm`` parser: one sub-parser per command of :data:`COMMANDS`, in its order, with
    its help, and the options of the commands named in ``declare`` (None: of every command)."""
    parser = _Parser(prog="ndpdimm", description="NDP-DIMM accelerator toolkit")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        module = command(name)
        p = sub.add_parser(name, help=module.HELP)
        if declare is None or name in declare:
            module.add_arguments(p)
    return parser


def command_named(argv) -> str | None:
    """The command ``argv`` runs: its first word that is not an option (the parser takes no
    option before the command but ``-h``); None if there is none."""
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv=None) -> int:
    """Run ``ndpdimm`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status, or
    exits with status 2 (argparse) on a bad option."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(declare=(command_named(argv),)).parse_args(argv)
    try:
        check_timeline(args)
        return command(args.command).run(args)
    except ValueError as e:
        print(f"ndpdimm {args.command}: error: {e}", file=sys.stderr)
        return 2


def console_main():
    """Entry point of the ``ndpdimm`` script."""
    sys.exit(main())


if __name__ == "__main__":
    console_main()
