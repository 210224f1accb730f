"""What ``helm template`` renders from the KAOS chart, for the default values and each
documented combination: the objects, their security settings and least-privilege RBAC."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import yaml

from tests.fixtures.helm import (
    CHART_DIR,
    DOCUMENTED_COMBINATIONS,
    Helm,
    find_object,
    kinds,
)

APP_VERSION = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())["appVersion"]
STANDARD_LABELS = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/part-of",
    "helm.sh/chart",
)


def operator_container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = find_object(objects, "Deployment", "kaos-operator")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert isinstance(container, dict)
    return container


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def secret_data(secret: dict[str, Any]) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def test_default_values_render_the_operator_and_nothing_else(helm: Helm) -> None:
    objects = helm.template()

    assert kinds(objects) == {
        "ServiceAccount/kaos-operator",
        "ConfigMap/kaos-operator",
        "ClusterRole/kaos-operator",
        "ClusterRoleBinding/kaos-operator",
        "Role/kaos-operator-leader-election",
        "RoleBinding/kaos-operator-leader-election",
        "Deployment/kaos-operator",
        "PodDisruptionBudget/kaos-operator",
        "Service/kaos-operator-metrics",
    }
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert all(label in labels for label in STANDARD_LABELS), obj["metadata"]["name"]
        assert labels["app.kubernetes.io/instance"] == "kaos"
        if obj["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            assert obj["metadata"]["namespace"] == "kaos-system"


def test_operator_runs_non_root_read_only_without_capabilities(helm: Helm) -> None:
    objects = helm.template()
    pod = find_object(objects, "Deployment", "kaos-operator")["spec"]["template"]["spec"]
    container = operator_container(objects)

    assert pod["serviceAccountName"] == "kaos-operator"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert container["command"] == ["kaos-operator"]
    assert container["image"] == f"ghcr.io/kaos-tools/kaos-operator:{APP_VERSION}"
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]


def test_operator_settings_come_from_the_configmap_and_env(helm: Helm) -> None:
    objects = helm.template()
    container = operator_container(objects)
    config = find_object(objects, "ConfigMap", "kaos-operator")["data"]

    assert container["envFrom"] == [{"configMapRef": {"name": "kaos-operator"}}]
    assert config == {
        "KAOS_SECURITY_ENABLED": "false",
        "KAOS_USER_ISSUER": "",
        "KAOS_USER_AUDIENCE": "kaos",
        "KAOS_USER_PRINCIPAL_CLAIM": "sub",
        "KAOS_USER_JWKS_URL": "",
        "KAOS_USER_AUTHORIZED_PARTY": "",
        "KAOS_USER_RBAC": "true",
        "KAOS_USER_USERNAME_CLAIM": "sub",
        "KAOS_USER_USERNAME_PREFIX": "",
        "KAOS_USER_GROUPS_CLAIM": "",
        "KAOS_USER_GROUPS_PREFIX": "",
        "KAOS_TOKEN_VERIFICATION": "jwks",
        "KAOS_SERVICE_ACCOUNT_ISSUER": "https://kubernetes.default.svc.cluster.local",
        "KAOS_CLUSTER_EGRESS": "",
        "KAOS_KEDA_NAMESPACE": "keda",
        "KAOS_IMAGE_OPERATOR": f"ghcr.io/kaos-tools/kaos-operator:{APP_VERSION}",
        "KAOS_IMAGE_MEMORY": f"ghcr.io/kaos-tools/kaos-memory:{APP_VERSION}",
        "KAOS_IMAGE_AGENT": f"ghcr.io/kaos-tools/kaos-agent:{APP_VERSION}",
        "KAOS_IMAGE_MCP": f"ghcr.io/kaos-tools/kaos-agent:{APP_VERSION}",
        "KAOS_IMAGE_LITELLM": "ghcr.io/berriai/litellm:main-stable",
        "KAOS_IMAGE_OLLAMA": "docker.io/ollama/ollama:0.17.4",
        "KAOS_IMAGE_PULL_POLICY": "IfNotPresent",
        "KAOS_TELEMETRY_ENDPOINT": "",
        "KAOS_TELEMETRY_SAMPLING_RATIO": "1",
        "KAOS_TELEMETRY_CAPTURE_CONTENT": "false",
        "KAOS_GATEWAY_API_ENABLED": "false",
        "KAOS_GATEWAY_NAME": "",
        "KAOS_GATEWAY_NAMESPACE": "",
        "KAOS_GATEWAY_SECTION_NAME": "",
        "KAOS_MCP_RUNTIMES": "{}",
    }
    env = env_of(container)
    assert env["KAOS_OPERATOR_LEADER_ELECTION"] == "true"
    assert env["KAOS_OPERATOR_LEASE_NAME"] == "kaos-operator"
    assert env["KAOS_OPERATOR_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["KAOS_OPERATOR_IDENTITY"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["KAOS_OPERATOR_PORT"] == "8080"
    assert env["KAOS_OPERATOR_WATCH_NAMESPACE"] == ""


def test_secured_the_operator_lists_mcp_tools_as_itself(helm: Helm) -> None:
    """Security on: the operator's own kaos.dev/mcp token and ServiceAccount name (MCP
    servers let it list their tools), and the posture's egress for every pod."""
    objects = helm.template(
        "posture.securityEnabled=true", "posture.clusterEgress={172.18.0.2/32:6443,10.9.0.0/16}"
    )
    container = operator_container(objects)
    env = env_of(container)
    assert env["KAOS_OPERATOR_SERVICE_ACCOUNT"] == "kaos-system/kaos-operator"
    assert env["KAOS_OPERATOR_MCP_TOKEN_FILE"] == "/var/run/secrets/kaos/mcp/token"
    mount = {"name": "kaos-mcp-token", "mountPath": "/var/run/secrets/kaos/mcp", "readOnly": True}
    assert mount in container["volumeMounts"]
    pod = find_object(objects, "Deployment", "kaos-operator")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "kaos-mcp-token")
    assert volume["projected"]["sources"] == [
        {
            "serviceAccountToken": {
                "audience": "kaos.dev/mcp",
                "path": "token",
                "expirationSeconds": 3600,
            }
        }
    ]
    config = find_object(objects, "ConfigMap", "kaos-operator")["data"]
    assert config["KAOS_CLUSTER_EGRESS"] == "172.18.0.2/32:6443,10.9.0.0/16"
    # Security off: neither.
    open_env = env_of(operator_container(helm.template()))
    assert "KAOS_OPERATOR_MCP_TOKEN_FILE" not in open_env


def test_registry_tags_and_posture_reach_the_configmap(helm: Helm) -> None:
    objects = helm.template(
        "images.registry=registry.example.com/kaos/",
        "images.memory.tag=1.2.3",
        "images.pullPolicy=Always",
        "posture.securityEnabled=true",
        "posture.userIssuer=https://issuer.example.com",
        "posture.userAudience=kaos-gateway",
        "posture.userPrincipalClaim=email",
    )
    config = find_object(objects, "ConfigMap", "kaos-operator")["data"]

    assert config["KAOS_IMAGE_MEMORY"] == "registry.example.com/kaos/kaos-memory:1.2.3"
    assert config["KAOS_IMAGE_AGENT"] == f"registry.example.com/kaos/kaos-agent:{APP_VERSION}"
    # Third-party images keep their own registry.
    assert config["KAOS_IMAGE_OLLAMA"] == "docker.io/ollama/ollama:0.17.4"
    assert config["KAOS_IMAGE_PULL_POLICY"] == "Always"
    assert config["KAOS_SECURITY_ENABLED"] == "true"
    assert config["KAOS_USER_ISSUER"] == "https://issuer.example.com"
    assert config["KAOS_USER_AUDIENCE"] == "kaos-gateway"
    assert config["KAOS_USER_PRINCIPAL_CLAIM"] == "email"


def test_cluster_role_grants_only_what_the_operator_uses(helm: Helm) -> None:
    role = find_object(helm.template(), "ClusterRole", "kaos-operator")
    grants = {
        (group, resource): set(rule["verbs"])
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    crud = {"get", "list", "watch", "create", "patch", "delete"}
    kaos_kinds = ("agents", "modelapis", "mcpservers", "memorystores")

    expected = {("kaos.tools", kind): {"get", "list", "watch"} for kind in kaos_kinds}
    expected |= {("kaos.tools", f"{k}/status"): {"patch"} for k in kaos_kinds}
    expected |= {("kaos.tools", f"{k}/finalizers"): {"update"} for k in kaos_kinds}
    expected |= {
        ("apps", "deployments"): crud,
        ("", "services"): crud,
        ("", "configmaps"): crud,
        ("", "persistentvolumeclaims"): crud,
        # One identity per Agent and the NetworkPolicies of the secured posture.
        ("", "serviceaccounts"): crud,
        ("networking.k8s.io", "networkpolicies"): crud,
        ("policy", "poddisruptionbudgets"): crud,
        # An Agent's spec.autoscaling: an HPA, or KEDA's ScaledObject where it is served.
        ("autoscaling", "horizontalpodautoscalers"): crud,
        ("keda.sh", "scaledobjects"): crud,
        # An Agent's spec.schedules: its CronJobs, and the Jobs they start (read only).
        ("batch", "cronjobs"): crud,
        ("batch", "jobs"): {"get", "list", "watch"},
        # Listed only while a resource's Deployment is not available, to name the cause
        # in its Ready condition (a claim's Events, the pods' states).
        ("", "events"): {"create", "list"},
        ("", "pods"): {"list"},
    }
    assert grants == expected
    assert not any("resourceNames" in rule for rule in role["rules"])
    # Still no Secrets, no tokens of the ServiceAccounts it creates, no RBAC.
    assert not {r for _, r in grants} & {"secrets", "serviceaccounts/token"}
    assert not any(group == "rbac.authorization.k8s.io" for group, _ in grants)


def test_token_verification_and_issuer_reach_the_configmap(helm: Helm) -> None:
    objects = helm.template(
        "posture.securityEnabled=true",
        "posture.tokenVerification=tokenreview",
        "posture.serviceAccountIssuer=https://oidc.example.test/cluster",
    )
    config = find_object(objects, "ConfigMap", "kaos-operator")["data"]

    assert config["KAOS_TOKEN_VERIFICATION"] == "tokenreview"
    assert config["KAOS_SERVICE_ACCOUNT_ISSUER"] == "https://oidc.example.test/cluster"


def test_tokenreview_rbac_only_when_chosen_with_security(helm: Helm) -> None:
    def tokenreview_objects(*sets: str) -> set[str]:
        return {k for k in kinds(helm.template(*sets)) if "tokenreview" in k}

    assert tokenreview_objects() == set()
    assert tokenreview_objects("posture.securityEnabled=true") == set()
    assert tokenreview_objects("posture.tokenVerification=tokenreview") == set()
    assert tokenreview_objects(
        "posture.securityEnabled=true", "posture.tokenVerification=tokenreview"
    ) == {"ClusterRole/kaos-tokenreview"}

    objects = helm.template(
        "posture.securityEnabled=true",
        "posture.tokenVerification=tokenreview",
        "operator.watchNamespace=team-a",
        "posture.tokenReviewNamespaces={team-b,team-a}",
    )
    role = find_object(objects, "ClusterRole", "kaos-tokenreview")
    assert role["rules"] == [
        {
            "apiGroups": ["authentication.k8s.io"],
            "resources": ["tokenreviews"],
            "verbs": ["create"],
        }
    ]
    # One binding per namespace, the watched one not twice; memory pods (default
    # ServiceAccount) and agents (one ServiceAccount each) of that namespace only.
    bindings = [
        o
        for o in objects
        if o["kind"] == "ClusterRoleBinding"
        and o["metadata"]["name"].startswith("kaos-tokenreview")
    ]
    assert sorted(b["metadata"]["name"] for b in bindings) == [
        "kaos-tokenreview-team-a",
        "kaos-tokenreview-team-b",
    ]
    for binding in bindings:
        ns = binding["metadata"]["name"].removeprefix("kaos-tokenreview-")
        assert binding["roleRef"]["name"] == "kaos-tokenreview"
        assert binding["subjects"] == [
            {
                "kind": "Group",
                "apiGroup": "rbac.authorization.k8s.io",
                "name": f"system:serviceaccounts:{ns}",
            }
        ]


def test_memory_admin_roles_and_reviews_only_with_security(helm: Helm) -> None:
    def memory_objects(*sets: str) -> set[str]:
        return {k for k in kinds(helm.template(*sets)) if "-memory-" in k}

    assert memory_objects() == set()
    # In either verification mode: admin calls are reviewed by the API server.
    for mode in ("jwks", "tokenreview"):
        objects = helm.template(
            "posture.securityEnabled=true",
            f"posture.tokenVerification={mode}",
            "operator.watchNamespace=team-a",
            "posture.tokenReviewNamespaces={team-b,team-a}",
        )
        assert {k for k in kinds(objects) if "-memory-" in k} == {
            "ClusterRole/kaos-memory-reader",
            "ClusterRole/kaos-memory-admin",
            "ClusterRole/kaos-memory-review",
            "ClusterRoleBinding/kaos-memory-review-team-a",
            "ClusterRoleBinding/kaos-memory-review-team-b",
        }, mode
    data = [{"apiGroups": ["kaos.tools"], "resources": ["memorystores/data"]}]
    reader = find_object(objects, "ClusterRole", "kaos-memory-reader")
    assert reader["rules"] == [{**data[0], "verbs": ["get"]}]
    admin = find_object(objects, "ClusterRole", "kaos-memory-admin")
    assert admin["rules"] == [{**data[0], "verbs": ["get", "delete", "create", "update"]}]
    review = find_object(objects, "ClusterRole", "kaos-memory-review")
    assert review["rules"] == [
        {
            "apiGroups": ["authentication.k8s.io"],
            "resources": ["tokenreviews"],
            "verbs": ["create"],
        },
        {
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["subjectaccessreviews"],
            "verbs": ["create"],
        },
    ]
    # The memory pods' ServiceAccount only (each namespace's default), not every agent's.
    binding = find_object(objects, "ClusterRoleBinding", "kaos-memory-review-team-b")
    assert binding["roleRef"]["name"] == "kaos-memory-review"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "default", "namespace": "team-b"}
    ]


def test_leader_election_lease_is_restricted_by_name(helm: Helm) -> None:
    objects = helm.template("operator.leaderElection.leaseName=kaos-leader")
    role = find_object(objects, "Role", "kaos-operator-leader-election")
    binding = find_object(objects, "RoleBinding", "kaos-operator-leader-election")

    assert role["metadata"]["namespace"] == "kaos-system"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["kaos-leader"],
            "verbs": ["get", "update"],
        },
    ]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "kaos-operator", "namespace": "kaos-system"}
    ]
    env = env_of(operator_container(objects))
    assert env["KAOS_OPERATOR_LEASE_NAME"] == "kaos-leader"


def test_without_leader_election_there_is_no_lease_role(helm: Helm) -> None:
    objects = helm.template("operator.leaderElection.enabled=false")

    assert not any(o["kind"] in ("Role", "RoleBinding") for o in objects)
    assert env_of(operator_container(objects))["KAOS_OPERATOR_LEADER_ELECTION"] == "false"


def test_a_watched_namespace_binds_the_role_there_only(helm: Helm) -> None:
    objects = helm.template("operator.watchNamespace=team-a")
    bindings = [
        o for o in objects if o["kind"] == "RoleBinding" and o["roleRef"]["kind"] == "ClusterRole"
    ]

    assert not any(o["kind"] == "ClusterRoleBinding" for o in objects)
    assert [b["metadata"]["namespace"] for b in bindings] == ["team-a"]
    assert env_of(operator_container(objects))["KAOS_OPERATOR_WATCH_NAMESPACE"] == "team-a"


def test_replicas_and_disruption_budget(helm: Helm) -> None:
    objects = helm.template(*DOCUMENTED_COMBINATIONS["two-replicas"])
    deployment = find_object(objects, "Deployment", "kaos-operator")
    pdb = find_object(objects, "PodDisruptionBudget", "kaos-operator")

    assert deployment["spec"]["replicas"] == 2
    assert pdb["spec"]["minAvailable"] == 1
    assert "maxUnavailable" not in pdb["spec"]
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]


def test_service_monitor_scrapes_the_metrics_service(helm: Helm) -> None:
    objects = helm.template(
        "operator.metrics.serviceMonitor.enabled=true",
        "operator.metrics.serviceMonitor.labels.release=prometheus",
    )
    monitor = find_object(objects, "ServiceMonitor", "kaos-operator")
    service = find_object(objects, "Service", "kaos-operator-metrics")

    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()


def test_a_config_change_rolls_the_operator(helm: Helm) -> None:
    def checksum(*sets: str) -> str:
        deployment = find_object(helm.template(*sets), "Deployment", "kaos-operator")
        return str(deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"])

    assert checksum() == checksum()
    assert checksum() != checksum("posture.securityEnabled=true")
    assert checksum() != checksum("images.agent.tag=9.9.9")


def test_dev_pgvector_is_off_by_default_and_complete_when_on(helm: Helm) -> None:
    assert not any("pgvector" in name for name in kinds(helm.template()))

    objects = helm.template(
        "devPgvector.enabled=true", "devPgvector.connectionSecret.extraNamespaces={team-a}"
    )
    auth = secret_data(find_object(objects, "Secret", "kaos-pgvector"))
    connections = [
        o
        for o in objects
        if o["kind"] == "Secret" and o["metadata"]["name"] == "kaos-pgvector-connection"
    ]
    deployment = find_object(objects, "Deployment", "kaos-pgvector")
    service = find_object(objects, "Service", "kaos-pgvector")

    assert sorted(c["metadata"]["namespace"] for c in connections) == ["kaos-system", "team-a"]
    password = auth["password"]
    assert len(password) == 32
    for connection in connections:
        data = secret_data(connection)
        assert data["dsn"] == (
            f"postgresql://kaos:{password}@kaos-pgvector.kaos-system.svc:5432/kaos?sslmode=disable"
        )
        assert data["password"] == password
    assert service["spec"]["ports"][0]["port"] == 5432
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "pgvector/pgvector:pg16"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    env = env_of(container)
    assert env["POSTGRES_PASSWORD"] == {
        "secretKeyRef": {"name": "kaos-pgvector", "key": "password"}
    }
    initdb = find_object(objects, "ConfigMap", "kaos-pgvector-initdb")
    assert "CREATE EXTENSION IF NOT EXISTS vector" in initdb["data"]["01-vector.sql"]
    # No PVC unless persistence is asked for.
    assert not any(o["kind"] == "PersistentVolumeClaim" for o in objects)


def test_dev_pgvector_given_password_and_persistence(helm: Helm) -> None:
    objects = helm.template(
        "devPgvector.enabled=true",
        "devPgvector.password=s3cret-pass",
        "devPgvector.persistence.enabled=true",
        "devPgvector.persistence.size=2Gi",
    )
    data = secret_data(find_object(objects, "Secret", "kaos-pgvector-connection"))
    claim = find_object(objects, "PersistentVolumeClaim", "kaos-pgvector")

    assert data["password"] == "s3cret-pass"
    assert ":s3cret-pass@" in data["dsn"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "2Gi"


def test_release_name_prefixes_every_object(helm: Helm) -> None:
    objects = helm.template(release="team")

    assert {o["metadata"]["name"] for o in objects} <= {
        "team-kaos-operator",
        "team-kaos-operator-leader-election",
        "team-kaos-operator-metrics",
    }


@pytest.mark.parametrize("name", sorted(DOCUMENTED_COMBINATIONS))
def test_documented_combination_renders_and_lints(helm: Helm, name: str) -> None:
    sets = DOCUMENTED_COMBINATIONS[name]
    assert helm.template(*sets)
    argv = ["lint", str(CHART_DIR), "--strict", "--namespace", "kaos-system"]
    for assignment in sets:
        argv += ["--set", assignment]
    lint = helm.run(*argv)
    assert "0 chart(s) failed" in lint.stdout
    assert "[WARNING]" not in lint.stdout and "[ERROR]" not in lint.stdout


def test_notes_tell_what_was_installed_and_what_stays(helm: Helm) -> None:
    proc = helm.run(
        "install", "kaos", str(CHART_DIR), "--namespace", "kaos-system", "--dry-run=client",
        "--set", "devPgvector.enabled=true",
        "--set", "devPgvector.connectionSecret.extraNamespaces={team-a}",
    )  # fmt: skip
    notes = proc.stdout.split("NOTES:", 1)[1]

    assert "KAOS 0.1.0 is installed in namespace kaos-system" in notes
    assert "kubectl delete crd agents.kaos.tools" in notes
    assert "kaos-pgvector-connection (key `dsn`) in kaos-system, team-a" in notes
    assert "NOT for production" in notes
    # An install from the OCI chart has no samples/ directory: the CLI carries them.
    assert "kubectl apply -f samples/" not in notes
    assert "pip install kaos-tools" in notes
    assert "kaos samples deploy $s --wait" in notes
    assert "kubectl explain agents.spec" in notes


def test_operator_reads_every_variable_the_chart_sets(helm: Helm) -> None:
    """The chart and kaos_operator.settings agree on names: a variable the operator does
    not read would be a setting silently lost. KAOS_IMAGE_OPERATOR is informational."""
    from kaos_operator.settings import OperatorSettings

    objects = helm.template("operator.extraEnv[0].name=UNRELATED", "operator.extraEnv[0].value=x")
    config = find_object(objects, "ConfigMap", "kaos-operator")["data"]
    names = set(config) | set(env_of(operator_container(objects))) - {"UNRELATED"}
    read = set(OperatorSettings.env_names())

    assert names - read == {"KAOS_IMAGE_OPERATOR"}
