"""``ndpdimm cpu-profile``: ``ndpdimm gpu-profile`` on the host CPU (torch's CPU device): the
GEMV bandwidth (one token) and GEMM throughput of this machine's CPU on a model's layer, as a
profile table ``gpu-fit`` reads. Defaults: BF16, as the public GPU tables (a CPU without AMX or
AVX512-BF16 converts it in software: that is what it costs there) and token counts up to 256;
``--out DIR``."""

import argparse

from ndpdimm.sw.commands.gpu_profile import add_profile_run_options
from ndpdimm.sw.commands.gpu_profile import run as run_profile

__all__ = ["HELP", "add_arguments", "run"]

HELP = ("time one layer's operators of a model on this machine's CPU (torch) and write them as a "
        "profile table: the host's GEMV bandwidth and GEMM throughput")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_profile_run_options(parser, "cpu", "1,2,4,8,16,32,64,128,256", "bf16")


def run(args: argparse.Namespace) -> int:
    return run_profile(args)
