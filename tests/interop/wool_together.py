"""Import wool and wool_idle into one process and use both protocols
(executed by the wool 0.15 virtualenv's Python, with wool-idle installed)."""

import json

import wool
import wool.protocol

import wool_idle
import wool_idle.proto
from wool_idle.exporter.app import create_app  # the exporter can be embedded
from wool_idle.worker import WorkerConnection

theirs = wool.protocol.StopRequest(timeout=1.5)
ours = wool_idle.proto.StopRequest.FromString(theirs.SerializeToString())
print(
    json.dumps(
        {
            "wool": wool.__version__ if hasattr(wool, "__version__") else "?",
            "grace": ours.timeout,
            "names": [
                wool.protocol.StopRequest.DESCRIPTOR.full_name,
                wool_idle.proto.StopRequest.DESCRIPTOR.full_name,
            ],
            "embedded": callable(create_app) and WorkerConnection is not None,
        }
    )
)
