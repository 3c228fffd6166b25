"""Following wool's own discovery: which pools to watch, and how.

Shared by the exporter (it takes its targets from a namespace) and the
autoscaler (it publishes a drop for a worker it stopped). It imports the
``wool`` package only where a namespace is actually attached, so the parts
that never follow a pool do not need it installed. It never creates or owns a
namespace: an observer that owned one would take it away from everyone when
it exits.
"""
