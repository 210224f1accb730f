"""A Hosted ModelAPI's desired objects: Ollama on a model-store claim, non-root on a
read-only root filesystem, the spec reaching its script only through the environment."""

from __future__ import annotations

from typing import Any

import pytest
from kaos_core.crds import ModelAPI, reasons
from kaos_core.crds.generate import crd_document
from kaos_core.crds.modelapi import ServerConfig
from kaos_operator.desired import ModelAPIContext, desired_modelapi_objects
from kaos_operator.desired.modelapi import OLLAMA_SCRIPT, models_pvc_name
from kaos_operator.desired.overrides import SpecRefused
from kaos_operator.settings import OperatorSettings
from pydantic import ValidationError

from tests.support.operator_objects import IMAGES, by_kind, env_of, hosted_api, model_api

SOURCE = "models.registry.svc:5000/library/smollm2:135m"


def objects(api: ModelAPI) -> dict[str, dict[str, Any]]:
    return by_kind(desired_modelapi_objects(api, ModelAPIContext(images=IMAGES)))


def main_container(dep: dict[str, Any]) -> dict[str, Any]:
    return dict(dep["spec"]["template"]["spec"]["containers"][0])


def test_the_default_ollama_image_is_pinned() -> None:
    image = OperatorSettings.from_env({}).images.ollama
    assert image == "docker.io/ollama/ollama:0.17.4"


def test_the_model_store_is_a_claim_the_modelapi_owns() -> None:
    objs = objects(hosted_api("ol"))
    pvc = objs["PersistentVolumeClaim"]
    assert pvc["metadata"]["name"] == "ol-models" == models_pvc_name(hosted_api("ol"))
    assert pvc["metadata"]["ownerReferences"][0]["uid"] == "uid-ol"
    assert pvc["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "10Gi"}},
    }
    sized = objects(hosted_api("ol", storage={"size": "2Gi", "storageClassName": "fast"}))
    assert sized["PersistentVolumeClaim"]["spec"]["resources"]["requests"]["storage"] == "2Gi"
    assert sized["PersistentVolumeClaim"]["spec"]["storageClassName"] == "fast"

    pod = objs["Deployment"]["spec"]["template"]["spec"]
    assert {v["name"]: v for v in pod["volumes"]} == {
        "models": {"name": "models", "persistentVolumeClaim": {"claimName": "ol-models"}},
        "tmp": {"name": "tmp", "emptyDir": {}},
    }
    mounts = {m["mountPath"]: m["name"] for m in main_container(objs["Deployment"])["volumeMounts"]}
    assert mounts == {"/var/lib/ollama": "models", "/tmp": "tmp"}
    # One ReadWriteOnce claim: the old pod goes before the new one mounts it.
    assert objs["Deployment"]["spec"]["strategy"] == {"type": "Recreate"}


def test_ollama_runs_restricted_with_its_home_and_models_on_the_claim() -> None:
    dep = objects(hosted_api())["Deployment"]
    container = main_container(dep)
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "readOnlyRootFilesystem": True,
    }
    assert dep["spec"]["template"]["spec"]["securityContext"] == {
        "runAsNonRoot": True,
        "fsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert env_of(dep) == {
        "OLLAMA_HOST": "0.0.0.0:11434",
        "OLLAMA_MODEL": "smollm2:135m",
        "OLLAMA_SOURCE": "smollm2:135m",
        "OLLAMA_INSECURE": "false",
        "HOME": "/var/lib/ollama",
        "OLLAMA_MODELS": "/var/lib/ollama/models",
    }
    assert container["image"] == IMAGES.ollama
    assert container["command"] == ["/bin/sh", "-c", OLLAMA_SCRIPT]


def test_a_source_registry_reaches_the_pod_only_through_its_environment() -> None:
    plain = main_container(objects(hosted_api())["Deployment"])
    dep = objects(hosted_api(source=SOURCE, insecureRegistry=True))["Deployment"]
    env = env_of(dep)
    assert (env["OLLAMA_MODEL"], env["OLLAMA_SOURCE"], env["OLLAMA_INSECURE"]) == (
        "smollm2:135m",
        SOURCE,
        "true",
    )
    # The script is one constant: no value of the spec is ever part of its text.
    assert main_container(dep)["command"] == plain["command"]
    assert SOURCE not in OLLAMA_SCRIPT and "smollm2" not in OLLAMA_SCRIPT


def test_the_context_length_reaches_ollama_and_only_from_the_spec() -> None:
    assert "OLLAMA_CONTEXT_LENGTH" not in env_of(objects(hosted_api())["Deployment"])
    dep = objects(hosted_api(contextLength=8192))["Deployment"]
    assert env_of(dep)["OLLAMA_CONTEXT_LENGTH"] == "8192"
    for wrong in (0, 511, 2_000_000, "8k"):
        with pytest.raises(ValidationError):
            hosted_api(contextLength=wrong)
    # The operator's own: an override naming it is refused, not merged.
    with pytest.raises(SpecRefused):
        objects(
            model_api(
                mode="Hosted",
                serverConfig={"model": "smollm2:135m", "contextLength": 8192},
                container={"env": [{"name": "OLLAMA_CONTEXT_LENGTH", "value": "2048"}]},
            )
        )


def test_ready_needs_the_scripts_mark_and_the_model() -> None:
    container = main_container(objects(hosted_api())["Deployment"])
    probe = container["readinessProbe"]
    assert probe["exec"]["command"] == [
        "/bin/sh",
        "-c",
        'test -s /tmp/kaos-model-ready && ollama show "$OLLAMA_MODEL" >/dev/null',
    ]
    assert probe["timeoutSeconds"] == 5
    assert container["livenessProbe"]["httpGet"] == {"path": "/", "port": "http"}


@pytest.mark.parametrize(
    "name",
    [
        "smollm2:135m",
        "smollm2",
        "library/smollm2:latest",
        "registry.ollama.ai/library/smollm2:135m",
        SOURCE,
        "hf.co/bartowski/SmolLM2-135M-Instruct-GGUF:Q4_K_M",
    ],
)
def test_model_references_are_accepted(name: str) -> None:
    assert ServerConfig(model="m", source=name).pull_source() == name
    assert ServerConfig(model=name).pull_source() == name


@pytest.mark.parametrize(
    "name",
    [
        "m; rm -rf /",
        "$(id)",
        "m`id`",
        "m:1 --insecure",
        "-m",
        "m\nx",
        "m|x",
        "../m",
        "m:",
        "",
    ],
)
def test_shell_syntax_is_not_a_model_reference(name: str) -> None:
    with pytest.raises(ValidationError):
        ServerConfig(model=name)
    with pytest.raises(ValidationError):
        ServerConfig(model="m", source=name)


def test_more_than_one_replica_is_refused() -> None:
    """The CRD refuses it (one ReadWriteOnce model store); an object stored before that
    rule existed is refused by the builder, naming the field, with nothing applied."""
    api = model_api("ol", mode="Hosted", serverConfig={"model": "m"}, replicas=2)
    with pytest.raises(SpecRefused) as info:
        objects(api)
    assert info.value.reason == reasons.INVALID_SPEC
    assert info.value.problems == [
        "spec.replicas: mode Hosted runs at most one replica (one ReadWriteOnce model store)"
    ]
    # Scaled to zero: the claim (and so the pulled model) stays.
    zero = objects(model_api("ol", mode="Hosted", serverConfig={"model": "m"}, replicas=0))
    assert zero["Deployment"]["spec"]["replicas"] == 0
    assert "PersistentVolumeClaim" in zero


def test_the_crd_carries_the_hosted_rules() -> None:
    """What the API server enforces at admission (tests/e2e/operator exercise it)."""
    schema = crd_document(ModelAPI.info)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]
    rules = {r["message"]: r["rule"] for r in spec["x-kubernetes-validations"]}
    assert (
        rules[
            "mode Hosted runs at most one replica: its model store is one ReadWriteOnce volume "
            "(put a Proxy ModelAPI in front of several Hosted ones to scale)"
        ]
        == "self.mode != 'Hosted' || !has(self.replicas) || self.replicas <= 1"
    )
    server = spec["properties"]["serverConfig"]
    assert server["x-kubernetes-validations"] == [
        {
            "rule": "!self.insecureRegistry || has(self.source)",
            "message": "insecureRegistry applies to a source registry: Ollama's default one is "
            "HTTPS",
        }
    ]
    assert server["properties"]["source"]["pattern"] == server["properties"]["model"]["pattern"]
    assert server["properties"]["storage"]["default"] == {"size": "10Gi"}
    caps = schema["properties"]["status"]["properties"]["modelCapabilities"]
    assert caps["additionalProperties"]["items"] == {"type": "string", "maxLength": 63}
