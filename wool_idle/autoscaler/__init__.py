"""The autoscaler: reads idle metrics back and retires workers idle past the rule.

It never renders the worker gauge and never imports the exporter.
"""
