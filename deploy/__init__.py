"""Deployment artifacts (systemd units, a Kubernetes kustomization) and their generator.

``python -m deploy.prometheus_rule`` writes ``deploy/kubernetes/prometheusrule.yaml``
from ``dashboards/prometheus/alerts.yml``; see ``docs/deploy.md``.
"""
