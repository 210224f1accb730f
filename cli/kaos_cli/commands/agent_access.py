"""``kaos agent grant|revoke|who-can``: who may talk to an agent, in Kubernetes RBAC.

Under the secured posture with ``posture.userRbac`` an agent serves a verified user only
when RBAC lets them ``create`` the ``agents/invoke`` subresource of that Agent
(``kaos_core.auth.invoke``). ``grant`` writes ordinary RBAC objects for one Agent, owned
by it (deleted with it): a Role ``kaos-invoke-<agent>`` allowing exactly that on that one
Agent (``resourceNames``), and one RoleBinding per user or group, named deterministically
from the subject (``kaos-invoke-<agent>-user-<digest>``), so granting twice changes nothing
and ``revoke`` finds it again. A RoleBinding of the chart's ClusterRole
``<release>-agent-user`` instead grants every Agent of its namespace (every namespace for
a ClusterRoleBinding); ``who-can`` lists both kinds of binding, and says that other RBAC
(any role with that verb) may grant it too: the API server's answer is what counts.

User and group names are the Kubernetes names the agents ask about: the token's claims
behind the posture's prefixes (``posture.userUsernamePrefix``, ``userGroupsPrefix``).
"""

from __future__ import annotations

import hashlib
from typing import Any

import click
from kaos_core.auth.invoke import RESOURCE, SUBRESOURCE, VERB
from kaos_core.crds.common import GROUP

from kaos_cli.commands.common import Cx, common_options, complete_resource
from kaos_cli.kinds import AGENT
from kaos_cli.kubectl.sync import Kube
from kaos_cli.output import emit, info
from kaos_cli.tools import EXIT_ENVIRONMENT, CliError

RBAC_GROUP = "rbac.authorization.k8s.io"
DEFAULT_CLUSTER_ROLE = "kaos-agent-user"
MANAGED_BY = {"app.kubernetes.io/managed-by": "kaos-cli"}
# Room for the prefix, the kind and two digests within a name of 253 characters.
MAX_AGENT_PART = 190
complete_agent = complete_resource(AGENT.resource)


def role_name(agent: str) -> str:
    if len(agent) <= MAX_AGENT_PART:
        return f"kaos-invoke-{agent}"
    # Two long names sharing a prefix must not share a Role.
    digest = hashlib.sha256(agent.encode()).hexdigest()[:10]
    return f"kaos-invoke-{agent[:MAX_AGENT_PART]}-{digest}"


def binding_name(agent: str, kind: str, subject: str) -> str:
    """Deterministic: the same grant is the same object (subject names may hold any
    character, so they enter the name as a digest)."""
    digest = hashlib.sha256(f"{kind}\0{subject}".encode()).hexdigest()[:10]
    return f"{role_name(agent)}-{kind.lower()}-{digest}"


def _owner(agent: dict[str, Any]) -> list[dict[str, Any]]:
    meta = agent["metadata"]
    return [
        {
            "apiVersion": agent["apiVersion"],
            "kind": agent["kind"],
            "name": meta["name"],
            "uid": meta["uid"],
        }
    ]


def _role(agent: dict[str, Any]) -> dict[str, Any]:
    name = agent["metadata"]["name"]
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "Role",
        "metadata": {
            "name": role_name(name),
            "labels": MANAGED_BY,
            "ownerReferences": _owner(agent),
        },
        "rules": [
            {
                "apiGroups": [GROUP],
                "resources": [f"{RESOURCE}/{SUBRESOURCE}"],
                "resourceNames": [name],
                "verbs": [VERB],
            }
        ],
    }


def _binding(agent: dict[str, Any], kind: str, subject: str) -> dict[str, Any]:
    name = agent["metadata"]["name"]
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": binding_name(name, kind, subject),
            "labels": MANAGED_BY,
            "ownerReferences": _owner(agent),
        },
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": role_name(name)},
        "subjects": [{"apiGroup": RBAC_GROUP, "kind": kind, "name": subject}],
    }


def parse_subject(args: tuple[str, ...], group: str | None, command: str) -> tuple[str, str, str]:
    """(kind, name, agent) of ``USER AGENT`` or ``--group GROUP AGENT``."""
    usage = f"kaos agent {command} USER AGENT, or kaos agent {command} --group GROUP AGENT"
    if group is not None:
        if len(args) != 1:
            raise CliError(f"usage: {usage}", EXIT_ENVIRONMENT)
        kind, name, agent = "Group", group, args[0]
    else:
        if len(args) != 2:
            raise CliError(f"usage: {usage}", EXIT_ENVIRONMENT)
        kind, (name, agent) = "User", args
    if not name.strip() or name != name.strip():
        raise CliError(f"the {kind.lower()} name must be non-empty without surrounding spaces")
    return kind, name, agent


def _subject_options(fn: Any) -> Any:
    fn = click.option("--group", default=None, help="a group instead of a user")(fn)
    return click.argument("args", nargs=-1, metavar="USER|--group GROUP AGENT")(fn)


@click.command(
    "grant",
    help="Let a user (or --group) talk to an agent: a RoleBinding allowing create on its "
    "agents/invoke (posture.userRbac). Names are the Kubernetes names, prefixes included.",
)
@_subject_options
@common_options()
def grant_cmd(cx: Cx, args: tuple[str, ...], group: str | None) -> int:
    kind, subject, name = parse_subject(args, group, "grant")
    agent = cx.kube.get(AGENT.resource, name, missing=AGENT.missing())
    binding = binding_name(name, kind, subject)
    where = cx.kube.where()
    if cx.kube.find("rolebinding", binding) is not None:
        print(f"{kind.lower()} {subject} may already talk to agent {name} in {where}")
        return 0
    cx.kube.apply(_role(agent))
    cx.kube.apply(_binding(agent, kind, subject))
    print(
        f"{kind.lower()} {subject} may now talk to agent {name} in {where} (rolebinding {binding})"
    )
    return 0


@click.command(
    "revoke",
    help="Undo kaos agent grant: delete the RoleBinding it wrote for the user (or --group).",
)
@_subject_options
@common_options()
def revoke_cmd(cx: Cx, args: tuple[str, ...], group: str | None) -> int:
    kind, subject, name = parse_subject(args, group, "revoke")
    binding = binding_name(name, kind, subject)
    if not cx.kube.delete("rolebinding", binding, wait=False):
        raise CliError(
            f"{kind.lower()} {subject} has no grant on agent {name} in {cx.kube.where()}"
            f" (list them with: kaos agent who-can {name})"
        )
    print(f"{kind.lower()} {subject} may no longer talk to agent {name} in {cx.kube.where()}")
    info(f"other RBAC may still grant it: kaos agent who-can {name}")
    return 0


def _bound(bindings: list[dict[str, Any]], kind: str, role: str, via: str) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for b in bindings:
        ref = b.get("roleRef") or {}
        if ref.get("kind") != kind or ref.get("name") != role:
            continue
        for s in b.get("subjects") or []:
            rows.append(
                {
                    "kind": str(s.get("kind")),
                    "name": str(s.get("name")),
                    "binding": f"{via}/{b['metadata']['name']}",
                }
            )
    return rows


def who_can(kube: Kube, agent: str, cluster_role: str) -> list[dict[str, str]]:
    """The subjects of the bindings that grant invoking ``agent``: to its own Role, and to
    ``cluster_role`` in its namespace or cluster-wide."""
    local = kube.items("rolebindings")
    rows = _bound(local, "Role", role_name(agent), "rolebinding")
    rows += _bound(local, "ClusterRole", cluster_role, "rolebinding")
    try:
        cluster = kube.items("clusterrolebindings", namespaced=False)
    except CliError as exc:
        info(f"cluster-wide bindings not read: {exc.message}")
        cluster = []
    rows += _bound(cluster, "ClusterRole", cluster_role, "clusterrolebinding")
    return sorted(rows, key=lambda r: (r["kind"], r["name"], r["binding"]))


@click.command(
    "who-can",
    help="The users and groups bound to talk to an agent: kaos agent grant's RoleBindings "
    "and bindings of the chart's ClusterRole (other RBAC may also grant it).",
)
@click.argument("name", shell_complete=complete_agent)
@click.option(
    "--cluster-role",
    default=DEFAULT_CLUSTER_ROLE,
    show_default=True,
    help="the chart's <release>-agent-user ClusterRole",
)
@common_options()
def who_can_cmd(cx: Cx, name: str, cluster_role: str) -> int:
    cx.kube.get(AGENT.resource, name, missing=AGENT.missing())
    rows = who_can(cx.kube, name, cluster_role)
    if cx.fmt == "table":
        emit(
            "table",
            rows,
            ["kind", "name", "binding"],
            [list(r.values()) for r in rows],
            empty=f"no user or group is bound to talk to agent {name}",
        )
        info(
            f"other RBAC may also grant create on {RESOURCE}/{SUBRESOURCE}; ask the API server:"
            f" kubectl auth can-i create {RESOURCE}.{GROUP}/{name} --subresource={SUBRESOURCE}"
            f" --as USER -n {cx.kube.namespace_name()}"
        )
    else:
        emit(
            cx.fmt,
            {"agent": name, "namespace": cx.kube.namespace_name(), "subjects": rows},
        )
    return 0
