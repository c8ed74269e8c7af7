"""What every run of the HTTP benchmark needs, handed to each measurement."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass

from harness.server import Server

from .client import load
from .cpu import CpuMeter, Run
from .seeding import Items


@dataclass
class Context:
    """What every run needs: the options, the server, the meter, the items and the buyers."""

    args: argparse.Namespace
    server: Server
    meter: CpuMeter
    items: Items
    tokens: list[str]

    def measure(self, requests: Iterator[bytes], seconds: float) -> Run:
        before = self.meter.sample()
        tally = load(self.server.port, requests, self.args.concurrency, seconds)
        return Run(tally, before, self.meter.sample())
