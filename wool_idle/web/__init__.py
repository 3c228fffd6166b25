"""The HTTP scaffold the exporter and the autoscaler share.

- ``config``: ``--web.config.file`` (exporter-toolkit's format: TLS, basic auth);
- ``basicauth``: the bcrypt basic-auth middleware;
- ``site``: serving an app on ``host:port`` or ``unix:/path``; default ports;
- ``app``: ``/``, ``/-/healthy``, ``/-/ready`` and the landing page;
- ``metrics``: rendering a collector as the scraper asks; ``wool_idle_build_info``.
"""
