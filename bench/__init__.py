"""Benchmarks: run with ``python -m bench.<name>``; results in docs/benchmarks.md."""

import os

os.environ.setdefault("GRPC_VERBOSITY", "NONE")  # before grpc loads, here and in children
