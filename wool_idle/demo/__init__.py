"""``wool-idle demo``: a live fleet with the exporter and the autoscaler."""
