"""Regenerate ``worker_pb2.py`` and ``worker_pb2.pyi`` from ``worker.proto``.

Run ``python -m wool_idle.proto.generate`` after editing the ``.proto``. The
gencode is rewritten to register its file in a private descriptor pool rather
than protobuf's default pool: the message names equal wool's on purpose (the
wire contract), and two files defining ``wool.runtime.protobuf.wire.Void`` in
one pool cannot coexist, so ``import wool`` and ``import wool_idle`` in the
same process would otherwise fail. ``tests/proto`` fails when the committed
files differ from what this produces.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
PROTO_FILE = "worker.proto"
GENERATED = ("worker_pb2.py", "worker_pb2.pyi")
DEFAULT_POOL = "_descriptor_pool.Default()"
PRIVATE_POOL = "_descriptor_pool.DescriptorPool()"


def render() -> dict[str, str]:
    """Return the generated files' text by name, with the private pool applied."""
    from grpc_tools import protoc  # build-time dependency only

    with tempfile.TemporaryDirectory() as out:
        status = protoc.main(
            ["protoc", f"-I{PROTO_DIR}", f"--python_out={out}", f"--pyi_out={out}", PROTO_FILE]
        )
        if status != 0:
            raise RuntimeError(f"protoc failed with status {status}")
        texts = {name: (Path(out) / name).read_text() for name in GENERATED}
    if texts["worker_pb2.py"].count(DEFAULT_POOL) != 1:
        raise RuntimeError("unexpected gencode: cannot find the default pool registration")
    texts["worker_pb2.py"] = texts["worker_pb2.py"].replace(DEFAULT_POOL, PRIVATE_POOL)
    return texts


def main() -> int:
    """Write the generated files next to the ``.proto``."""
    for name, text in render().items():
        (PROTO_DIR / name).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
