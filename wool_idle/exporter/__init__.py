"""The exporter: renders every worker's idle RPC as ``wool_worker_idle_seconds``.

It never stops anything and never imports the autoscaler.
"""
