"""The kustomization in deploy/kubernetes: rendered by ``kubectl kustomize`` offline,
every object valid (core kinds: kubernetes-validate strict; prometheus-operator kinds:
their CRD schema made strict), and the properties retirement and safety rely on."""

from __future__ import annotations

import argparse
import copy
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from support.worker_shutdown import worker_shutdown_at_most

from wool_idle import __version__
from wool_idle.autoscaler.actuator import STOP_REPLY_WAIT
from wool_idle.autoscaler.daemon import exit_wait
from wool_idle.autoscaler.sources.source import DEFAULT_MAX_BYTES
from wool_idle.cli.values import DURATION
from wool_idle.exporter.connections import ADHOC_LIMIT
from wool_idle.proto import SERVICE
from wool_idle.worker.server import CLOSE_GRACE

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "dashboards" / "prometheus" / "alerts.yml"
# 1.27: the first with gRPC probes GA; 1.37: the newest kubernetes-validate knows.
VERSIONS = ["1.27.0", "1.32.0", "1.37.0"]
IMAGE = f"registry.example.com/wool-idle:{__version__}"
INT32_MAX = 2**31 - 1  # the largest value of an int32 field such as backoffLimit
LARGEST_FLEET_SCRAPE = 10.0  # the --timeout docs/scaling.md gives 10,000 workers' exporter
WORKLOADS = ("Deployment", "Job", "StatefulSet", "DaemonSet", "ReplicaSet", "CronJob")
DEPLOY_DOC = ROOT / "docs" / "deploy.md"
OVERLAY_MARK = "# my-overlay/kustomization.yaml"  # the overlay docs/deploy.md shows
OVERLAY_BASE = "../wool-idle/deploy/kubernetes"
CLIENT_LABEL = "wool-idle/client"  # the label of the pods that may dispatch to workers
LARGEST_FLEET = 10_000  # the workers docs/scaling.md gives one fan-out exporter
# The sizing rules of docs/scaling.md ("Memory and CPU per daemon"), from VmHWM measured
# by bench/envelopes.py: the exporter's start-up, each connection to a worker over TLS
# (the costlier kind), each scrape rendered at once (4: an HA pair, a federation, a
# person), one 10,000-worker answer with 300 characters of wool labels per worker.
EXPORTER_BASE_MIB = 64
TLS_CONNECTION_KIB = 95
CONCURRENT_SCRAPES = 4
SCRAPE_MIB = 3 * 17_000_000 / 2**20  # rendering holds about 3x the 17 MB answer
# The autoscaler: its start-up, and what parsing a body holds per byte of it (exposition
# text of 35-byte series, 11.1x measured; of a 10,000-worker fleet's, 8.4x; Prometheus
# JSON of 140-byte series, 6.5x).
AUTOSCALER_BASE_MIB = 64
PARSE_FACTOR = 12
MEBIBYTES = {"Ki": 2**-10, "Mi": 1, "Gi": 2**10}
Manifest = dict[str, Any]
Validate = Callable[[Manifest, str], None]  # the conftest fixtures' types
ParseEnvironment = Callable[[str, dict[str, str]], argparse.Namespace]


def only(manifests: list[Manifest], kind: str, name: str | None = None) -> Manifest:
    """The one object of ``kind`` (and ``name``)."""
    found = [
        m
        for m in manifests
        if m["kind"] == kind and (name is None or m["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''}"
    return found[0]


def pod_specs(manifests: list[Manifest]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(workload name, pod spec) of every workload."""
    for manifest in manifests:
        if manifest["kind"] in WORKLOADS:
            yield manifest["metadata"]["name"], manifest["spec"]["template"]["spec"]


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a label selector with ``matchLabels`` only selects ``labels`` (an empty
    selector selects every pod)."""
    assert set(selector) <= {"matchLabels"}, selector
    return all(labels.get(key) == value for key, value in selector.get("matchLabels", {}).items())


def environment(container: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item["value"] for item in container.get("env", [])}


def mebibytes(quantity: str) -> float:
    """A Kubernetes memory quantity (``512Mi``, ``1Gi``) in MiB."""
    match = re.fullmatch(r"(\d+)([KMG]i)", quantity)
    assert match, quantity
    return int(match[1]) * MEBIBYTES[match[2]]


def seconds(text: str) -> float:
    """A duration as the CLI reads it."""
    value = DURATION.parse(text)
    assert isinstance(value, float)
    return value


def container_of(manifests: list[Manifest], subcommand: str) -> dict[str, Any]:
    """The one container that runs ``wool-idle SUBCOMMAND``."""
    found = [
        container
        for _, spec in pod_specs(manifests)
        for container in spec["containers"]
        if container["args"][0] == subcommand
    ]
    assert len(found) == 1, f"{len(found)} containers run {subcommand}"
    return found[0]


def _set(path: tuple[Any, ...], value: Any) -> Callable[[Manifest], None]:
    def mutate(manifest: Manifest) -> None:
        target = manifest
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return mutate


def _drop(path: tuple[Any, ...]) -> Callable[[Manifest], None]:
    def mutate(manifest: Manifest) -> None:
        target = manifest
        for step in path[:-1]:
            target = target[step]
        del target[path[-1]]

    return mutate


POD = ("spec", "template", "spec")
FIRST = (*POD, "containers", 0)
RULE = ("spec", "groups", 0, "rules", 0)
ENDPOINT = ("spec", "endpoints", 0)
# (kind, name, how the rendered copy is broken): each must be rejected.
INVALID = [
    ("Deployment", "wool-idle-exporter", _set((*FIRST, "readinessProbe", "bogusField"), 1)),
    ("Deployment", "wool-idle-autoscaler", _set((*POD, "securityContext", "runAsNonroot"), True)),
    ("Deployment", "wool-idle-autoscaler", _set(("spec", "replicas"), "one")),
    ("Job", "wool-worker", _set((*FIRST, "readinessProbe", "grpc", "serviceName"), "x")),
    ("Job", "wool-worker", _set((*FIRST, "readinessProbe", "grpc", "port"), "grpc")),
    ("Job", "wool-worker", _drop((*FIRST, "readinessProbe", "grpc", "port"))),
    ("Service", "wool-idle", _set(("spec", "ports", 0, "prot"), 9478)),
    ("ConfigMap", "wool-idle-targets", _set(("datas",), {})),
    ("NetworkPolicy", "wool-worker", _set(("spec", "ingress", 0, "form"), [])),
    ("NetworkPolicy", "wool-worker", _set(("spec", "policyTypes"), "Ingress")),
    ("ServiceMonitor", "wool-idle", _set((*ENDPOINT, "scrapeInterval"), "30s")),
    ("ServiceMonitor", "wool-idle", _set((*ENDPOINT, "scheme"), "ftp")),
    ("ServiceMonitor", "wool-idle", _set((*ENDPOINT, "interval"), "30")),
    ("ServiceMonitor", "wool-idle", _drop(("spec", "selector"))),
    ("PrometheusRule", "wool-idle", _set((*RULE, "expresion"), "up")),
    ("PrometheusRule", "wool-idle", _drop((*RULE, "expr"))),
    ("PrometheusRule", "wool-idle", _set((*RULE, "for"), "5x")),
    ("PrometheusRule", "wool-idle", _set((*RULE, "for"), 300)),
    ("PrometheusRule", "wool-idle", _set(("kind",), "PrometheusRules")),
]


class TestKustomization:
    @pytest.mark.parametrize("version", VERSIONS)
    def test_render_every_object_valid(
        self, manifests: list[Manifest], validate: Validate, version: str
    ) -> None:
        """Given the kustomization rendered by kubectl (no warning), when every object
        is validated for Kubernetes ``version``, then each passes: core kinds in
        kubernetes-validate's strict mode, ServiceMonitor and PrometheusRule against
        their strict CRD schema."""
        # Act / Assert: validate raises on the first invalid object
        for manifest in manifests:
            validate(manifest, version)
        assert {m["kind"] for m in manifests} >= {
            "Deployment",
            "Job",
            "Service",
            "ConfigMap",
            "NetworkPolicy",
            "ServiceMonitor",
            "PrometheusRule",
        }

    @pytest.mark.parametrize(
        ("kind", "name", "mutate"), INVALID, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(INVALID)]
    )
    def test_render_invalid_object_rejected(
        self,
        manifests: list[Manifest],
        validate: Validate,
        kind: str,
        name: str,
        mutate: Callable[[Manifest], None],
    ) -> None:
        """Given a rendered object with a typo'd field, a wrong type, a missing required
        field or a value its schema forbids, when it is validated, then it is rejected
        (the validation can fail)."""
        # Arrange
        broken = copy.deepcopy(only(manifests, kind, name))
        mutate(broken)
        # Act / Assert
        rejections = (
            kubernetes_validate.ValidationError,
            kubernetes_validate.SchemaNotFoundError,
            jsonschema.ValidationError,
        )
        with pytest.raises(rejections):
            validate(broken, VERSIONS[-1])

    def test_render_rule_is_the_generated_one(self, manifests: list[Manifest]) -> None:
        """Given the rendered PrometheusRule, then it is the generated file's object
        (kustomize only adds the namespace and the part-of label)."""
        # Arrange
        generated = yaml.safe_load((ROOT / "deploy/kubernetes/prometheusrule.yaml").read_text())
        # Act
        rendered = only(manifests, "PrometheusRule")
        # Assert
        assert rendered["spec"] == generated["spec"]

    def test_render_overlay_sets_image_and_selection_label(
        self, tmp_path: Path, render: Callable[[Path], list[Manifest]]
    ) -> None:
        """Given the overlay docs/deploy.md shows (a real image, the label a
        kube-prometheus-stack Prometheus selects by), when it is rendered over the
        kustomization, then every container runs that image and the ServiceMonitor and
        PrometheusRule carry the label."""
        # Arrange
        block = DEPLOY_DOC.read_text().split(OVERLAY_MARK, 1)[1].split("```", 1)[0]
        overlay = tmp_path / "my-overlay"
        overlay.mkdir()
        base = os.path.relpath(ROOT / "deploy" / "kubernetes", overlay)
        assert OVERLAY_BASE in block
        (overlay / "kustomization.yaml").write_text(block.replace(OVERLAY_BASE, base))
        # Act
        manifests = render(overlay)
        # Assert
        images = {c["image"] for _, spec in pod_specs(manifests) for c in spec["containers"]}
        assert images == {"ghcr.io/example-org/wool-idle:0.2.0.dev0"}
        for kind in ("ServiceMonitor", "PrometheusRule"):
            assert only(manifests, kind)["metadata"]["labels"]["release"] == "kube-prometheus-stack"


class TestWorkers:
    def test_job_completes_a_retired_worker(self, manifests: list[Manifest]) -> None:
        """Given the workers, then they run as an Indexed Job with restartPolicy
        OnFailure and completions = parallelism (the pool size), so a worker that exits
        0 completes; and no other workload kind runs a worker (a Deployment would
        restart it)."""
        # Act
        job = only(manifests, "Job", "wool-worker")
        runs_worker = [
            m["kind"]
            for m in manifests
            if m["kind"] in WORKLOADS
            for c in m["spec"]["template"]["spec"]["containers"]
            if c["args"][0] == "worker"
        ]
        # Assert
        assert job["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"
        assert job["spec"]["completionMode"] == "Indexed"
        assert job["spec"]["completions"] == job["spec"]["parallelism"] >= 1
        assert runs_worker == ["Job"]

    def test_job_never_fails_from_restarts(self, manifests: list[Manifest]) -> None:
        """Given the worker Job, then its backoffLimit is the largest the API accepts:
        under OnFailure the Job fails once its running pods' container restarts add up
        to it, and Kubernetes then terminates every running worker, busy ones too."""
        # Act
        job = only(manifests, "Job", "wool-worker")
        # Assert
        assert job["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"
        assert job["spec"]["backoffLimit"] == INT32_MAX

    def test_job_starts_again_a_worker_stopped_by_a_signal(
        self, manifests: list[Manifest], parse_environment: ParseEnvironment
    ) -> None:
        """Given the worker Job, then its worker exits non-zero once SIGTERM stopped it
        (a node drain's eviction, a pod deletion; a stop still exits 0), and the Job's
        restart semantics stay as docs/deploy.md says (OnFailure, the largest
        backoffLimit, no podFailurePolicy): the evicted pod fails and its index runs
        again rather than count complete, the pool one worker smaller for good."""
        # Arrange
        job = only(manifests, "Job", "wool-worker")
        worker = container_of(manifests, "worker")
        # Act
        args = parse_environment("worker", environment(worker))
        # Assert
        assert args.signal_exit_code != 0
        assert job["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"
        assert job["spec"]["backoffLimit"] == INT32_MAX
        assert "podFailurePolicy" not in job["spec"]

    def test_job_probes_ask_the_grpc_health_service(self, manifests: list[Manifest]) -> None:
        """Given the worker container, then readiness is a gRPC probe on the port it
        listens on, for the Worker service's own health name."""
        # Arrange
        worker = container_of(manifests, "worker")
        port = int(environment(worker)["WOOL_IDLE_LISTEN"].rpartition(":")[2])
        # Act
        readiness = worker["readinessProbe"]
        # Assert
        assert readiness["grpc"] == {"port": port, "service": SERVICE}
        assert [p["containerPort"] for p in worker["ports"]] == [port]

    def test_job_has_no_liveness_probe(self, manifests: list[Manifest]) -> None:
        """Given the worker container, then it has no liveness probe: the health
        service answers on the worker's event loop, which a task running blocking or
        CPU-bound code holds (no answer, however healthy the worker), and a liveness
        failure kills the container whatever the restart policy: a busy worker would
        lose its tasks, a draining one be restarted, undoing its retirement."""
        # Act
        worker = container_of(manifests, "worker")
        # Assert
        assert "livenessProbe" not in worker

    def test_job_termination_outlasts_a_drain(self, manifests: list[Manifest]) -> None:
        """Given the worker Job, then the pod's termination grace covers the worker's
        whole shutdown on SIGTERM (its grace, the wait for cancelled tasks, the
        server's close grace and the clean-up time), so no task is lost uncancelled."""
        # Arrange
        job = only(manifests, "Job", "wool-worker")
        own_drain = seconds(environment(container_of(manifests, "worker"))["WOOL_IDLE_GRACE"])
        # Act
        termination = job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        # Assert
        assert termination > worker_shutdown_at_most(own_drain)

    def test_autoscaler_termination_outlasts_its_shutdown(self, manifests: list[Manifest]) -> None:
        """Given the autoscaler's Deployment and its settings, then Kubernetes waits on
        a deleted pod longer than its shutdown can take (the stops under way: the idle
        RPC and the wait for a stop's reply; then the wait for stops still going on;
        the HTTP server's close), so no stop call is cut short."""
        # Arrange
        deployment = only(manifests, "Deployment", "wool-idle-autoscaler")
        settings = environment(container_of(manifests, "autoscaler"))
        rpc_timeout = seconds(settings.get("WOOL_IDLE_RPC_TIMEOUT", "5s"))
        grace = seconds(settings.get("WOOL_IDLE_GRACE", "30s"))
        # Act
        termination = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        # Assert
        assert termination > rpc_timeout + STOP_REPLY_WAIT + exit_wait(grace) + CLOSE_GRACE

    def test_autoscaler_state_file_is_on_a_writable_volume(self, manifests: list[Manifest]) -> None:
        """Given the autoscaler's Deployment (a read-only root file system), then its
        state file is in the directory of a mounted emptyDir, which outlives a container
        restart."""
        # Arrange
        deployment = only(manifests, "Deployment", "wool-idle-autoscaler")
        container = container_of(manifests, "autoscaler")
        state_file = PurePosixPath(environment(container)["WOOL_IDLE_STATE_FILE"])
        volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
        # Act
        mounted = [m for m in container["volumeMounts"] if m["mountPath"] == str(state_file.parent)]
        # Assert
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert len(mounted) == 1 and not mounted[0].get("readOnly", False)
        assert volumes[mounted[0]["name"]]["emptyDir"] == {}

    def test_targets_name_every_worker_of_the_job(self, manifests: list[Manifest]) -> None:
        """Given the exporter's targets ConfigMap and the Job, then the targets are
        exactly <job>-<index>.<subdomain>:<port> for every index, and the subdomain is a
        headless Service over the worker pods that publishes not-ready pods too."""
        # Arrange
        job = only(manifests, "Job", "wool-worker")
        pod = job["spec"]["template"]
        port = container_of(manifests, "worker")["ports"][0]["containerPort"]
        service = only(manifests, "Service", pod["spec"]["subdomain"])
        expected = {
            f"{job['metadata']['name']}-{index}.{service['metadata']['name']}:{port}"
            for index in range(job["spec"]["completions"])
        }
        # Act
        data = only(manifests, "ConfigMap", "wool-idle-targets")["data"]["targets.yml"]
        targets = {t for group in yaml.safe_load(data) for t in group["targets"]}
        # Assert
        assert targets == expected
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["publishNotReadyAddresses"] is True
        assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()


class TestDaemons:
    def test_autoscaler_runs_alone(self, manifests: list[Manifest]) -> None:
        """Given the autoscaler's Deployment, then it has one replica replaced with
        Recreate (never two at once)."""
        # Act
        deployment = only(manifests, "Deployment", "wool-idle-autoscaler")
        # Assert
        assert deployment["spec"]["replicas"] == 1
        assert deployment["spec"]["strategy"] == {"type": "Recreate"}

    def test_exporter_liveness_waits_out_a_scrape(self, manifests: list[Manifest]) -> None:
        """Given the exporter's container, then its liveness probe waits for /-/healthy at
        least as long as a scrape of the largest fleet one exporter serves may take
        (docs/scaling.md: 10,000 workers, --timeout 10s), and its own --timeout: a
        fan-out holds the event loop for stretches (up to 0.6 s at 10,000 workers on a
        loaded 2-core machine, three to four times that on a slower one), and with the
        default 1 s three probes landing in scrapes (a 10 s scrape interval keeps them
        in step) would restart a healthy exporter, whose cold scrape is longer still."""
        # Arrange
        container = container_of(manifests, "exporter")
        own = seconds(environment(container).get("WOOL_IDLE_TIMEOUT", "5s"))
        # Act
        probe = container["livenessProbe"]
        # Assert
        assert probe.get("timeoutSeconds", 1) >= max(LARGEST_FLEET_SCRAPE, own)

    def test_exporter_memory_limit_holds_the_largest_fleet(self, manifests: list[Manifest]) -> None:
        """Given the exporter's container, then its memory limit holds the largest fleet
        one exporter serves (10,000 workers) over TLS, plus every ad-hoc ``/probe``
        connection it may keep (``--probe.adhoc-limit``), while several scrapes of
        workers with long wool labels render at once (docs/scaling.md): below it, the
        kernel kills the exporter in the middle of a scrape, and it restarts into the
        same load (a 512Mi limit was killed at 10,000 plaintext workers with 300
        characters of labels and 4 scrapers)."""
        # Arrange
        container = container_of(manifests, "exporter")
        adhoc = int(environment(container).get("WOOL_IDLE_PROBE_ADHOC_LIMIT", ADHOC_LIMIT))
        connections = LARGEST_FLEET + adhoc
        needed = (
            EXPORTER_BASE_MIB
            + connections * TLS_CONNECTION_KIB / 1024
            + CONCURRENT_SCRAPES * SCRAPE_MIB
        )
        # Act
        limit = mebibytes(container["resources"]["limits"]["memory"])
        # Assert
        assert limit >= needed, f"{limit} MiB < {needed:.0f} MiB"

    def test_autoscaler_memory_limit_holds_its_largest_read(
        self, manifests: list[Manifest]
    ) -> None:
        """Given the autoscaler's container, then its memory limit holds the parse of
        the largest body it accepts (``--source-max-bytes``): a limit below it is an
        OOM kill on a body the autoscaler would have read (the shipped 256Mi was killed
        by a 64 MiB exposition text, a 10,000-worker fleet's with ~1 KB of labels)."""
        # Arrange
        container = container_of(manifests, "autoscaler")
        largest = int(environment(container).get("WOOL_IDLE_SOURCE_MAX_BYTES", DEFAULT_MAX_BYTES))
        needed = AUTOSCALER_BASE_MIB + PARSE_FACTOR * largest / 2**20
        # Act
        limit = mebibytes(container["resources"]["limits"]["memory"])
        # Assert
        assert limit >= needed, f"{limit} MiB < {needed:.0f} MiB"

    @pytest.mark.parametrize("subcommand", ["worker", "exporter", "autoscaler"])
    def test_container_environment_is_valid_configuration(
        self, manifests: list[Manifest], parse_environment: ParseEnvironment, subcommand: str
    ) -> None:
        """Given each container, then its WOOL_IDLE_* variables are ones its subcommand
        reads, with values it accepts (the CLI's own parser, exit 2 otherwise), and it
        listens on all interfaces at the port it declares."""
        # Arrange
        container = container_of(manifests, subcommand)
        # Act
        args = parse_environment(subcommand, environment(container))
        # Assert
        listen = getattr(args, "listen", None) or args.web_listen_address
        declared = [port["containerPort"] for port in container["ports"]]
        assert listen == f"0.0.0.0:{declared[0]}"

    def test_servicemonitor_scrapes_the_jobs_the_alerts_name(
        self, manifests: list[Manifest]
    ) -> None:
        """Given the ServiceMonitor, then it selects the exporter's and the autoscaler's
        Services on a port both have, each selected Service is a job the alerts watch
        (prometheus-operator names the job after the Service), and every job the alerts
        name (job="..." or job=~"a|b") is such a Service or a job of the example
        Prometheus configs (/probe and sharded layouts the manifests do not run)."""
        # Arrange
        monitor = only(manifests, "ServiceMonitor")
        expression = monitor["spec"]["selector"]["matchExpressions"][0]
        port = monitor["spec"]["endpoints"][0]["port"]
        named = re.findall(r'job=~?"([^"]+)"', ALERTS.read_text())
        jobs = {job for alternatives in named for job in alternatives.split("|")}
        configs = [yaml.safe_load(path.read_text()) for path in ALERTS.parent.glob("**/*.yml")]
        examples = {
            job["job_name"]
            for config in configs
            if isinstance(config, dict)
            for job in config.get("scrape_configs", [])
        }
        # Act
        selected = {
            m["metadata"]["name"]: m
            for m in manifests
            if m["kind"] == "Service"
            and m["metadata"]["labels"].get(expression["key"]) in expression["values"]
        }
        # Assert
        assert expression["operator"] == "In"
        assert set(selected) == {"wool-idle", "wool-idle-autoscaler"}
        assert all(port in {p["name"] for p in s["spec"]["ports"]} for s in selected.values())
        assert set(selected) <= jobs <= set(selected) | examples


class TestSecurity:
    def test_pods_run_unprivileged(self, manifests: list[Manifest]) -> None:
        """Given every pod, then it runs as non-root with the default seccomp profile,
        no service-account token and no service-link variables (which the CLI would
        read as WOOL_IDLE_* configuration); every container has a read-only root file
        system, no privilege escalation and every capability dropped."""
        specs = dict(pod_specs(manifests))
        assert set(specs) == {"wool-worker", "wool-idle-exporter", "wool-idle-autoscaler"}
        for name, spec in specs.items():
            assert spec["securityContext"]["runAsNonRoot"] is True, name
            assert spec["securityContext"]["runAsUser"] != 0, name
            assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
            assert spec["automountServiceAccountToken"] is False, name
            assert spec["enableServiceLinks"] is False, name
            for container in spec["containers"]:
                context = container["securityContext"]
                assert context["readOnlyRootFilesystem"] is True, name
                assert context["allowPrivilegeEscalation"] is False, name
                assert context["capabilities"] == {"drop": ["ALL"]}, name

    def test_namespace_enforces_the_restricted_pod_security_standard(
        self, manifests: list[Manifest]
    ) -> None:
        """Given the namespace, then Kubernetes' Pod Security admission enforces the
        restricted standard there (which every pod meets: see above), so a pod edited
        to run privileged is refused rather than run."""
        # Act
        labels = only(manifests, "Namespace", "wool-idle")["metadata"].get("labels", {})
        # Assert
        assert labels.get("pod-security.kubernetes.io/enforce") == "restricted"

    def test_workers_take_connections_only_from_the_parts_and_labelled_clients(
        self, manifests: list[Manifest]
    ) -> None:
        """Given the worker pods, which serve ``dispatch`` (it unpickles, so runs, what it
        is sent) and ``stop`` without TLS, then a NetworkPolicy admits connections to
        them only on their gRPC port and only from the exporter, the autoscaler (of this
        namespace) and pods labelled ``CLIENT_LABEL`` (the application's), so no other
        pod of the cluster can run code in a worker or stop it; the exporter and the
        autoscaler are among those admitted."""
        # Arrange
        job = only(manifests, "Job", "wool-worker")
        worker_labels = job["spec"]["template"]["metadata"]["labels"]
        parts = {
            name: spec_labels
            for name, spec_labels in (
                (m["metadata"]["name"], m["spec"]["template"]["metadata"]["labels"])
                for m in manifests
                if m["kind"] == "Deployment"
            )
        }
        # Act
        policies = [
            m
            for m in manifests
            if m["kind"] == "NetworkPolicy"
            and selects(m["spec"]["podSelector"], worker_labels)
            and "Ingress" in m["spec"]["policyTypes"]
        ]
        # Assert
        assert len(policies) == 1, "no NetworkPolicy isolates the workers"
        rules = policies[0]["spec"]["ingress"]
        peers = [peer for rule in rules for peer in rule["from"]]
        assert all(rule.get("from") for rule in rules), "a rule admits every source"
        assert all(rule["ports"] == [{"port": "grpc", "protocol": "TCP"}] for rule in rules)
        for peer in peers:
            assert "ipBlock" not in peer, peer
            if "namespaceSelector" in peer:  # the application's pods, in any namespace
                assert peer["podSelector"] == {"matchLabels": {CLIENT_LABEL: "true"}}, peer
        own = [peer for peer in peers if "namespaceSelector" not in peer]
        for name, labels in parts.items():
            assert any(selects(peer["podSelector"], labels) for peer in own), name
        assert not any(selects(peer["podSelector"], worker_labels) for peer in peers)

    def test_images_are_the_placeholder_of_this_version(self, manifests: list[Manifest]) -> None:
        """Given every container, then its image is the documented placeholder tagged
        with this version (docs/deploy.md says how to point it at a real image)."""
        images = {c["image"] for _, spec in pod_specs(manifests) for c in spec["containers"]}
        assert images == {IMAGE}
