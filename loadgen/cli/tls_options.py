"""The flags of an https:// server's certificate check (`--ca-cert`, `--insecure`; docs/wire.md)."""

from __future__ import annotations

import argparse


def tls_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("TLS (https:// servers; see docs/wire.md)")
    g.add_argument("--ca-cert", metavar="FILE",
                   help="also trust the CA in this PEM file (a private CA, a self-signed server)")
    g.add_argument("--insecure", action="store_true",
                   help="check no certificate at all (said loudly at the start; prefer --ca-cert)")
