"""The HTTP scaffold the exporter and the autoscaler share.

Serving:

- ``config``: ``--web.config.file`` (exporter-toolkit's format: TLS, basic
  auth, response headers); ``server_tls``: its ``tls_server_config``;
- ``live_config``: that file followed as it changes; ``weakening``: what a new
  version may not change without a restart;
- ``basicauth``: the bcrypt basic-auth middleware (one check at a time);
- ``site``: serving an app on ``host:port`` or ``unix:/path``; default ports;
  ``unread``: aborting connections whose clients do not take their answers;
  ``handshake_garbage``: collecting what failed TLS handshakes leave behind;
- ``app``: ``/``, ``/-/healthy``, ``/-/ready`` and the landing page;
- ``metrics``: rendering a collector as the scraper asks; ``wool_idle_build_info``.
- ``reload``: ``POST /-/reload`` and SIGHUP, forced re-reads coalesced;
  ``followed_files``: what a forced re-read reads again.

Reading (the autoscaler's client):

- ``client_config``: ``--http.config.file`` (Prometheus's HTTP client format);
  ``client_tls``: its ``tls_config``;
- ``live_client_config``: the client config in force, following its file;
- ``client_session``: the aiohttp session that applies it (``LiveSession``: one
  per version of a followed config);
- ``urls``: URLs without their userinfo, fit to print.

Shared: ``yaml_fields`` (config files read as Go reads them, strictly),
``followed_config`` (how both config files are followed as they change) and
``tls_context`` (SSL contexts that follow their rotating certificate files).
"""
