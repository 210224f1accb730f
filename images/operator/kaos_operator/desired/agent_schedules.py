"""An Agent's schedules (``spec.schedules``) as CronJobs it owns, and their status.

Each schedule is one ``batch/v1`` CronJob ``<agent>-<schedule>`` (hash-shortened to the
52 characters a CronJob name may have); removing the schedule prunes it, and its Jobs go
with it. The CronJob controller keeps the history (three succeeded, three failed Jobs).
A run is a Job of one pod on the agent's image that sends the message to the agent's
Service over A2A (``python -m kaos_agent.invoke``) and exits with the run's outcome.

Placement: the run's pod goes where the Agent's pods may go and pulls the image as they
do (``spec.pod``'s node selector, tolerations, affinity, spread, priority class and pull
secrets), so a cluster that needs any of them to start the agent starts its runs too.

Identity: with security on, the pod runs as the Agent's own ServiceAccount and presents
the Agent's projected token of the peers' audience (``kaos.dev/agent``), exactly as a
peer delegating to it would: a self-subjected run, never a shared secret. The Agent's
callers file then lists the Agent itself (``self_caller``) and, when the Agent is not
exposed, its NetworkPolicy admits its schedules' pods (``admit_schedule_pods``). The
pods carry labels of their own (``agent-schedule``), so the Agent's Service, Deployment
and disruption budget never select them.

Tracing: when the Agent's pods are traced, so are its runs: the pod gets the same ``OTEL_*``
variables under the CronJob's name as ``service.name``, and the run's client span is the
parent of the agent's own spans, so a scheduled run is one trace from its start.

Status: ``status.schedules`` per schedule, read from the CronJob's status and from its
latest Job (named by the CronJob controller after the scheduled minute).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from datetime import datetime

from kaos_core.auth import names as auth
from kaos_core.crds.agent import Agent
from kaos_core.crds.schedules import AgentSchedule, ScheduleResult

from kaos_operator.desired.common import (
    MANAGED_BY,
    Obj,
    env_list,
    metadata,
    restricted_security_context,
)
from kaos_operator.desired.overrides import with_placement
from kaos_operator.desired.security import TOKENS_VOLUME, admit, agent_service_account
from kaos_operator.desired.telemetry import SERVICE_ENV

# A CronJob's name may have 52 characters: its Jobs add "-<minutes since the epoch>".
CRONJOB_NAME_MAX = 52
_HASH_LENGTH = 8
# The pods of schedules: labels of their own, so nothing that selects the agent's pods
# (its Service, Deployment, PodDisruptionBudget) selects them.
SCHEDULE_COMPONENT = "agent-schedule"
SCHEDULE_LABEL = "kaos.tools/schedule"
# A run that could not start within this long of its minute (the controller was down,
# Forbid skipped it) is not started late.
STARTING_DEADLINE_SECONDS = 120
HISTORY_LIMIT = 3
# How long one run may take when the Agent sets no wall-time budget, and the margin the
# Job gets beyond it (the pod starting, the answer coming back).
DEFAULT_RUN_SECONDS = 600
JOB_MARGIN_SECONDS = 60
# Small: the pod sends one request and waits.
RESOURCES: Obj = {
    "requests": {"cpu": "10m", "memory": "64Mi"},
    "limits": {"memory": "128Mi"},
}
INVOKE_COMMAND = ["python", "-m", "kaos_agent.invoke"]


def cronjob_name(agent_name: str, schedule_name: str) -> str:
    """``<agent>-<schedule>``; a longer one keeps its start and ends with a hash of the
    whole name, so two schedules never share a CronJob."""
    full = f"{agent_name}-{schedule_name}"
    if len(full) <= CRONJOB_NAME_MAX:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:_HASH_LENGTH]
    return f"{full[: CRONJOB_NAME_MAX - _HASH_LENGTH - 1].rstrip('-')}-{digest}"


def session_id(schedule_name: str) -> str:
    """The session every run of a schedule belongs to."""
    return f"schedule-{schedule_name}"


def run_seconds(agent: Agent) -> int:
    """How long one run may take: the Agent's wall-time budget, else ten minutes."""
    budget = agent.spec.config.task_config
    if budget is not None and budget.max_wall_time_seconds is not None:
        return budget.max_wall_time_seconds
    return DEFAULT_RUN_SECONDS


def schedule_labels(agent: Agent, schedule_name: str) -> dict[str, str]:
    """The labels of a schedule's Jobs and pods (the operator's watch selects on
    managed-by, so the Jobs are cached)."""
    return {
        "app.kubernetes.io/name": SCHEDULE_COMPONENT,
        "app.kubernetes.io/instance": agent.name,
        "app.kubernetes.io/component": SCHEDULE_COMPONENT,
        "app.kubernetes.io/part-of": "kaos",
        "app.kubernetes.io/managed-by": MANAGED_BY,
        SCHEDULE_LABEL: schedule_name,
    }


def token_volume() -> Obj:
    """The Agent's own token of the peers' audience, and nothing else (a run calls only
    the agent), rotated by kubelet."""
    return {
        "name": TOKENS_VOLUME,
        "projected": {
            "sources": [
                {
                    "serviceAccountToken": {
                        "audience": auth.AGENT_AUDIENCE,
                        "path": auth.AGENT_TOKEN_PATH.removeprefix(auth.TOKEN_DIR + "/"),
                        "expirationSeconds": auth.TOKEN_EXPIRATION_SECONDS,
                    }
                }
            ]
        },
    }


def invoke_args(agent: Agent, schedule: AgentSchedule, url: str, secured: bool) -> list[str]:
    args = ["--url", url, "--session", session_id(schedule.name)]
    args += ["--timeout", str(run_seconds(agent))]
    if secured:
        args += ["--token-file", auth.AGENT_TOKEN_PATH]
    return [*args, "--message", schedule.message]


def cronjob(
    agent: Agent,
    schedule: AgentSchedule,
    *,
    image: str,
    pull_policy: str,
    url: str,
    secured: bool,
    otel: Mapping[str, str] | None = None,
) -> Obj:
    """The CronJob of one schedule: one pod per run, never retried (the run's outcome is
    the Job's), its identity the Agent's own when ``secured``; traced as the Agent is when
    ``otel`` (the Agent's ``OTEL_*`` variables) is not empty."""
    name = cronjob_name(agent.name, schedule.name)
    env = {"PYTHONUNBUFFERED": "1"}
    if otel:
        env |= {**otel, SERVICE_ENV: name}
    main: Obj = {
        "name": "invoke",
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": INVOKE_COMMAND,
        "args": invoke_args(agent, schedule, url, secured),
        "env": env_list(env),
        "resources": RESOURCES,
        "securityContext": restricted_security_context(),
    }
    pod: Obj = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [main],
    }
    if secured:
        pod["serviceAccountName"] = agent_service_account(agent.name)
        pod["volumes"] = [token_volume()]
        main["volumeMounts"] = [
            {"name": TOKENS_VOLUME, "mountPath": auth.TOKEN_DIR, "readOnly": True}
        ]
    labels = schedule_labels(agent, schedule.name)
    spec: Obj = {
        "schedule": schedule.cron,
        "concurrencyPolicy": schedule.concurrency_policy,
        "suspend": schedule.suspend,
        "startingDeadlineSeconds": STARTING_DEADLINE_SECONDS,
        "successfulJobsHistoryLimit": HISTORY_LIMIT,
        "failedJobsHistoryLimit": HISTORY_LIMIT,
        "jobTemplate": {
            "metadata": {"labels": labels},
            "spec": {
                "backoffLimit": 0,
                "activeDeadlineSeconds": run_seconds(agent) + JOB_MARGIN_SECONDS,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": with_placement(pod, agent.spec.pod),
                },
            },
        },
    }
    if schedule.time_zone is not None:
        spec["timeZone"] = schedule.time_zone
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": metadata(agent, name),
        "spec": spec,
    }


def schedule_objects(
    agent: Agent,
    *,
    image: str,
    pull_policy: str,
    url: str,
    secured: bool,
    otel: Mapping[str, str] | None = None,
) -> list[Obj]:
    """One CronJob per schedule (none: every CronJob the Agent owns is pruned)."""
    return [
        cronjob(agent, s, image=image, pull_policy=pull_policy, url=url, secured=secured, otel=otel)
        for s in agent.spec.schedules
    ]


def self_caller(agent: Agent, callers: tuple[str, ...]) -> tuple[str, ...]:
    """The Agents its callers file lists: with schedules, the Agent itself too (its
    schedules' runs present its own token)."""
    if not agent.spec.schedules or agent.name in callers:
        return callers
    return tuple(sorted((*callers, agent.name)))


def admit_schedule_pods(policy: Obj, agent: Agent, port: int) -> Obj:
    """The Agent's NetworkPolicy, admitting its schedules' pods on ``port`` when it admits
    only its callers (an exposed Agent admits everyone already)."""
    if not agent.spec.schedules or agent.spec.agent_network.expose:
        return policy
    peer = {
        "podSelector": {
            "matchLabels": {
                "app.kubernetes.io/name": SCHEDULE_COMPONENT,
                "app.kubernetes.io/instance": agent.name,
            }
        }
    }
    return admit(policy, peer, port)


# -- status ---------------------------------------------------------------------------


def latest_job_name(cronjob: Obj) -> str | None:
    """The name of the Job the CronJob controller made for its last scheduled minute
    (``<cronjob>-<minutes since the epoch>``); None before its first run."""
    scheduled = (cronjob.get("status") or {}).get("lastScheduleTime")
    if not scheduled:
        return None
    moment = datetime.fromisoformat(str(scheduled).replace("Z", "+00:00"))
    return f"{cronjob['metadata']['name']}-{int(moment.timestamp()) // 60}"


def job_result(job: Obj | None) -> ScheduleResult | None:
    """succeeded or failed once the Job finished; None while it runs (or is unknown)."""
    for c in (job or {}).get("status", {}).get("conditions") or []:
        if c.get("status") != "True":
            continue
        if c.get("type") == "Complete":
            return "succeeded"
        if c.get("type") == "Failed":
            return "failed"
    return None


def schedule_status(
    schedule_name: str, cronjob: Obj | None, job: Obj | None, previous: Obj | None
) -> Obj:
    """One entry of ``status.schedules``. ``job`` is the CronJob's latest Job; while it
    runs (or is not seen yet) the result is the one ``previous`` recorded, unless the
    CronJob says the latest run completed."""
    observed = (cronjob or {}).get("status") or {}
    last = observed.get("lastScheduleTime")
    succeeded = observed.get("lastSuccessfulTime")
    result = job_result(job)
    if result is None and last and succeeded and str(succeeded) >= str(last):
        result = "succeeded"
    if result is None:
        result = (previous or {}).get("lastResult") or "none"
    entry: Obj = {"name": schedule_name, "lastResult": result}
    if last:
        entry["lastScheduleTime"] = last
    if succeeded:
        entry["lastSuccessfulTime"] = succeeded
    return entry


def schedules_status(
    agent: Agent,
    cronjobs: Callable[[str], Obj | None],
    jobs: Callable[[str], Obj | None],
    previous: list[Obj],
) -> tuple[list[Obj], bool]:
    """``status.schedules`` from the cached CronJobs and Jobs (by name, in the Agent's
    namespace), and whether a finished run's Job still looks unfinished in the cache (its
    last change not seen yet: look again shortly)."""
    before = {str(p.get("name")): p for p in previous if isinstance(p, dict)}
    out, lagging = [], False
    for schedule in agent.spec.schedules:
        cj = cronjobs(cronjob_name(agent.name, schedule.name))
        job_name = latest_job_name(cj) if cj is not None else None
        job = jobs(job_name) if job_name is not None else None
        active = bool(((cj or {}).get("status") or {}).get("active"))
        if job is not None and not active and job_result(job) is None:
            lagging = True
        out.append(schedule_status(schedule.name, cj, job, before.get(schedule.name)))
    return out, lagging
