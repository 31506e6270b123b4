"""The Kubernetes manifests in deploy/: valid against the API schemas, and as the design asks.

Validation is offline: kubernetes-validate ships the JSON schemas of every
Kubernetes version it supports inside the package and resolves their ``$ref``
in a local registry.  The ``no_network`` fixture makes any socket connection
fail during these tests, so a validator that tried to fetch a schema would
fail them rather than pass quietly.

Needs the ``kubernetes-validate`` package (for the ``test`` extra); without
it the schema tests are skipped and the policy tests still run.
"""

from __future__ import annotations

import copy
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.requires import require

yaml = require("yaml")

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
MANIFESTS = sorted(DEPLOY.glob("*.yaml")) + sorted(DEPLOY.glob("optional/*.yaml"))
# The oldest version the manifests must work on (preStop "sleep" needs 1.30), and the newest.
KUBERNETES_VERSIONS = ["1.30.0", "latest"]

try:
    from kubernetes_validate import utils as kv
except ImportError:  # pragma: no cover - depends on the environment
    kv = None

needs_validator = pytest.mark.skipif(
    kv is None,
    reason="kubernetes-validate is not installed: pip install kubernetes-validate "
    "(it bundles the Kubernetes JSON schemas; the test extra should list it)",
)


def load(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def resources() -> list[dict]:
    return [doc for path in MANIFESTS for doc in load(path)]


def by_kind(kind: str) -> dict:
    found = [r for r in resources() if r["kind"] == kind]
    assert len(found) == 1, f"expected one {kind} in deploy/, found {len(found)}"
    return found[0]


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network access during manifest validation: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    yield


def version(name: str) -> str:
    return kv.latest_version() if name == "latest" else name


def test_manifests_exist() -> None:
    kinds = sorted(r["kind"] for r in resources())
    assert {"Deployment", "Service", "PodDisruptionBudget"} <= set(kinds), kinds


@needs_validator
@pytest.mark.parametrize("kubernetes", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_manifest_is_valid(path: Path, kubernetes: str, no_network: None) -> None:
    """Strict: unknown fields (a typo such as ``readOnlyRootFileSystem``) are errors too."""
    for resource in load(path):
        kv.validate(resource, version(kubernetes), strict=True)


@needs_validator
def test_validator_rejects_a_broken_manifest(no_network: None) -> None:
    """The validator really checks: a misspelt field and a wrong type are refused."""
    deployment = by_kind("Deployment")
    misspelt = copy.deepcopy(deployment)
    container = misspelt["spec"]["template"]["spec"]["containers"][0]
    container["securityContext"]["readOnlyRootFileSystem"] = True
    with pytest.raises(kv.ValidationError):
        kv.validate(misspelt, version("latest"), strict=True)
    wrong_type = copy.deepcopy(deployment)
    wrong_type["spec"]["replicas"] = "two"
    with pytest.raises(kv.ValidationError):
        kv.validate(wrong_type, version("latest"), strict=True)


def pod_spec() -> dict:
    return by_kind("Deployment")["spec"]["template"]["spec"]


def container() -> dict:
    containers = pod_spec()["containers"]
    assert len(containers) == 1
    return containers[0]


def test_deployment_shape() -> None:
    deployment = by_kind("Deployment")
    assert deployment["spec"]["replicas"] == 2
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    c = container()
    assert c["image"] == "attention-viz:latest"
    assert [p["containerPort"] for p in c["ports"]] == [8000]


def test_probes() -> None:
    c = container()
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = c[probe]["httpGet"]
        assert get["path"] == path
        assert get["port"] in ("http", 8000)


def test_security_context() -> None:
    pod, c = pod_spec(), container()
    assert pod["securityContext"]["runAsNonRoot"] is True
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert not sc.get("privileged", False)
    # A read-only root needs a writable /tmp (HOME, TMPDIR and caches point there).
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "/tmp" in mounts
    assert "emptyDir" in volumes[mounts["/tmp"]]


def to_mebibytes(quantity: str) -> float:
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024}
    for unit, factor in units.items():
        if quantity.endswith(unit):
            return float(quantity[: -len(unit)]) * factor
    return float(quantity) / 2**20


def test_resources() -> None:
    resources_ = container()["resources"]
    for key in ("cpu", "memory"):
        assert key in resources_["requests"] and key in resources_["limits"]
    requested = to_mebibytes(resources_["requests"]["memory"])
    limit = to_mebibytes(resources_["limits"]["memory"])
    # One worker: ~0.3 GiB idle, ~0.85 GiB with the encoder's cache full (bench/bench_load.py).
    assert 512 <= requested <= limit
    assert limit >= 1024


def test_service_and_budget_select_the_pods() -> None:
    labels = by_kind("Deployment")["spec"]["template"]["metadata"]["labels"]
    service = by_kind("Service")
    assert service["spec"]["selector"].items() <= labels.items()
    assert [p["targetPort"] for p in service["spec"]["ports"]] in (["http"], [8000])
    budget = by_kind("PodDisruptionBudget")
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    # With 2 replicas, at most one pod may be taken away voluntarily.
    assert budget["spec"].get("minAvailable", 0) == 1 or budget["spec"].get("maxUnavailable") == 1


def test_runs_directory_is_a_shared_volume() -> None:
    """Trained models go to ATTENTION_VIZ_RUNS_DIR on a claim every replica mounts."""
    c = container()
    env = {e["name"]: e.get("value") for e in c["env"]}
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    assert env["ATTENTION_VIZ_RUNS_DIR"] in mounts
    volume = {v["name"]: v for v in pod_spec()["volumes"]}[mounts[env["ATTENTION_VIZ_RUNS_DIR"]]]
    name = volume["persistentVolumeClaim"]["claimName"]
    (claim,) = [
        r
        for r in resources()
        if r["kind"] == "PersistentVolumeClaim" and r["metadata"]["name"] == name
    ]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]  # shared by the replicas
    assert env["ATTENTION_VIZ_TRAIN_CONCURRENT"] == "1"
