"""deploy/: checkpoints reach every pod read-only at /models (ATTENTION_VIZ_MODELS)."""

from __future__ import annotations

from pathlib import Path

from tests.requires import require

yaml = require("yaml")

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_the_models_volume_is_mounted_read_only_where_the_app_looks() -> None:
    deployment = yaml.safe_load((DEPLOY / "deployment.yaml").read_text())
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["ATTENTION_VIZ_MODELS"] == "/models"
    assert int(env["ATTENTION_VIZ_LOADED_MODELS"]) >= 1
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "models"]
    assert mount == {"name": "models", "mountPath": "/models", "readOnly": True}
    assert any(v["name"] == "models" for v in pod["volumes"])


def test_the_optional_claim_is_read_only_many() -> None:
    claim = yaml.safe_load((DEPLOY / "optional" / "models-pvc.yaml").read_text())
    assert claim["kind"] == "PersistentVolumeClaim"
    assert claim["metadata"]["name"] == "attention-viz-models"
    assert claim["spec"]["accessModes"] == ["ReadOnlyMany"]
