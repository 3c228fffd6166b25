"""``/probe?target=...&debug=true``: the probe's steps, then its metrics."""

from __future__ import annotations

import json
import re

import grpc
from prometheus_client.parser import text_string_to_metric_families
from support.generic_server import serve_worker_methods

from wool_idle.proto import Void
from wool_idle.worker import LocalWorker

LINE = re.compile(r'^ts=\S+Z target=(?P<target>\S+) msg="(?P<msg>[^"]+)"(?P<facts>.*)$')


def parse(text: str) -> tuple[list[dict[str, str]], str]:
    """The log lines (msg and facts) and the metrics text of a debug answer."""
    logs, _, metrics = text.partition("\n\n\nMetrics that would have been returned:\n")
    assert logs.startswith("Logs for the probe:\n"), text
    lines = []
    for line in logs.removeprefix("Logs for the probe:\n").splitlines():
        match = LINE.match(line)
        assert match, line
        facts = dict(re.findall(r'(\w+)=("[^"]*"|\S+)', match["facts"]))
        lines.append({"target": match["target"], "msg": match["msg"], **facts})
    return lines, metrics


class TestDebugProbe:
    async def test_debug_probe_success_steps_and_metrics(self, exporter) -> None:
        """Given a configured idle worker, when /probe?debug=true asks for it, then the
        text shows the budget, a configured reused channel, the idle value and the
        metrics /probe would return."""
        # Arrange
        worker = LocalWorker()
        address = await worker.start()
        try:
            client = await exporter([address], timeout=3.0)
            await client.get("/metrics")  # the configured channel is open
            # Act
            response = await client.get("/probe", params={"target": address, "debug": "true"})
            text = await response.text()
        finally:
            await worker.stop(grace=1.0)
        # Assert
        assert response.status == 200
        assert response.content_type == "text/plain"
        lines, metrics = parse(text)
        messages = [line["msg"] for line in lines]
        assert messages == [
            "Beginning probe",
            "Using connection",
            "Calling the idle RPC",
            "Probe succeeded",
            "Connection kept open",
            "Probe finished",
        ]
        assert {line["target"] for line in lines} == {address}
        assert float(lines[0]["timeout_seconds"]) == 3.0
        assert (lines[1]["target_kind"], lines[1]["channel"]) == ("configured", "reused")
        assert float(lines[3]["idle_seconds"]) > 0
        families = {f.name: f for f in text_string_to_metric_families(metrics)}
        assert families["wool_worker_idle_seconds"].samples[0].labels == {"worker": address}

    async def test_debug_probe_failure_shows_the_reason(self, exporter) -> None:
        """Given an address nobody serves, when probed with debug, then the text shows
        a new ad-hoc channel, the failure's reason, the channel closed, and metrics
        without an idle series."""
        # Arrange
        client = await exporter([], timeout=1.0)
        # Act
        response = await client.get("/probe", params={"target": "127.0.0.1:1", "debug": "true"})
        lines, metrics = parse(await response.text())
        # Assert
        assert response.status == 200
        using = next(line for line in lines if line["msg"] == "Using connection")
        assert (using["target_kind"], using["channel"]) == ('"ad hoc"', "new")
        failed = next(line for line in lines if line["msg"] == "Probe failed")
        assert (failed["reason"], failed["up"]) == ("unavailable", "0")
        assert lines[-2]["msg"] == "Connection closed"
        samples = [s for f in text_string_to_metric_families(metrics) for s in f.samples]
        assert [s.value for s in samples if s.name == "wool_worker_up"] == [0.0]
        assert [s for s in samples if s.name == "wool_worker_idle_seconds"] == []

    async def test_debug_probe_failure_shows_the_status_and_its_message(self, exporter) -> None:
        """Given a real gRPC server whose idle RPC answers PERMISSION_DENIED with a
        message, when probed with debug, then the failed step shows the status and the
        message, not only the reason `other` (which a draining worker's
        FAILED_PRECONDITION shares): the runbooks send the operator here for it."""

        # Arrange
        async def idle(request: Void, context: grpc.aio.ServicerContext) -> Void:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "caller exporter not allowed")

        handler = grpc.unary_unary_rpc_method_handler(
            idle, request_deserializer=Void.FromString, response_serializer=Void.SerializeToString
        )
        server, address = await serve_worker_methods({"idle": handler})
        try:
            client = await exporter([], timeout=3.0)
            # Act
            response = await client.get("/probe", params={"target": address, "debug": "true"})
            lines, _ = parse(await response.text())
        finally:
            await server.stop(0)
        # Assert
        failed = next(line for line in lines if line["msg"] == "Probe failed")
        assert (failed["reason"], failed["up"]) == ("other", "1")
        assert "PERMISSION_DENIED: caller exporter not allowed" in json.loads(failed["error"])

    async def test_debug_probe_target_cannot_forge_a_fact(self, exporter) -> None:
        """Given a target whose address holds blanks, quotes and ``key=value`` text (a
        Unix socket path may: a wool discovery record any local user can publish, linked
        from the landing page), when probed with debug, then each line's target is one
        quoted value (logfmt) holding the address, and no line carries a second ``msg``
        or a forged ``idle_seconds``."""
        # Arrange
        address = 'unix:/tmp/no x" msg="Probe succeeded" idle_seconds=9999 a="'
        client = await exporter([], timeout=1.0)
        # Act
        response = await client.get("/probe", params={"target": address, "debug": "true"})
        logs = (await response.text()).split("\n\n\n")[0].splitlines()[1:]
        # Assert
        assert response.status == 200 and logs
        for line in logs:
            pairs = re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|[^\s"]+)(?: |$)', line)
            assert " ".join(f"{k}={v}" for k, v in pairs) == line
            keys = [key for key, _ in pairs]
            assert keys[:3] == ["ts", "target", "msg"] and len(keys) == len(set(keys))
            assert json.loads(pairs[1][1]) == address
            assert "idle_seconds" not in keys

    async def test_probe_debug_other_values_are_plain(self, exporter) -> None:
        """Given debug=false (only `true` turns it on, as in blackbox_exporter), then the
        usual exposition text."""
        client = await exporter([], timeout=1.0)
        response = await client.get("/probe", params={"target": "127.0.0.1:1", "debug": "1"})
        text = await response.text()
        assert not text.startswith("Logs for the probe:")
        assert "wool_worker_up" in text
