"""A scenario's plan -> the Kubernetes manifests that run it (``distval export kubernetes``).

Everything a pod runs comes from the one-Engine ScenarioPlan (distval/targets/engines/planning.py), mapped rather than
derived again: the launcher command, the environment and the suite spec of each node's container, its resources and GPUs.
Only what differs between Docker and Kubernetes is translated:

- node i's container -> pod i of an Indexed Job (completions = parallelism = nodes, backoffLimit 0); what
  differs between the nodes' containers in the plan must be the node rank, and comes from the pod's job
  completion index through the downward API (``--node_rank=i`` becomes ``PET_NODE_RANK``, which torchrun
  reads for its option; RANK and DISTVAL_NODE_RANK likewise), so no shell is needed in the image;
- node 0's container name -> pod 0's DNS name ``<job>-0.<service>`` under a headless Service (JobSet:
  ``<jobset>-node-0-0.<jobset>``, the Service JobSet makes);
- the files copied in -> a ConfigMap (the suite's *.py and the spec) and emptyDir volumes, at the same paths;
- what ran -> the plan file beside the manifests (``<job>.plan.json``: distval/targets/plan_file.py), whose SHA-256
  every resource and pod carries (annotation ``distval.plan-sha256``): collect judges the pods' logs against it;
- the scenario network's subnets -> none: a pod has one interface, the suite then leaves GLOO_SOCKET_IFNAME
  unset; an internal network -> a NetworkPolicy allowing egress only to the job's pods and DNS;
- the deadline -> activeDeadlineSeconds: Kubernetes counts it from the Job's start, image pulls and scheduling
  included, so it is the scenario's deadline plus ``PodOptions.pull_timeout_s`` (the time an image pull and
  scheduling may take; named in the annotation ``distval.deadline``), not a deadline that a slow pull eats into.

A cluster admits what Pod Security "restricted" allows by default (``PodOptions.security``): the pods run as a
non-root uid (the scenario's ``user:``, else ``--run-as-user``), with no privilege escalation, every capability
dropped and the runtime's default seccomp profile; ``--pod-security none`` leaves the image's own user for images
that must run as root. CPU pods request the CPU and memory their ranks need; tolerations, node selectors and
image pull secrets come from the command line.

What has no Kubernetes form is refused per scenario with the reason (node 0 by IP, extra networks, a user
by name); ulimits are not settable per pod and are named in an annotation instead.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from distval import strict_json
from distval.config import Config
from distval.errors import PlanError
from distval.labels import LABEL_MANAGED, LABEL_RUN, LABEL_SCENARIO
from distval.plan.model import ScenarioPlan
from distval.plan.placeholders import placeholders_in, resolve
from distval.plan.specs import ContainerPlan
from distval.targets.declarations import KUBERNETES
from distval.targets.docker.plan import C10D_PORT, MASTER_PORT
from distval.targets.docker.runtime import suite_dir
from distval.targets.engines.planning import plan_run
from distval.targets.origin import Origin
from distval.targets.plan_file import PLAN_SHA256_KEY, plan_text, sha256_text

LAYOUTS = ("indexed-job", "jobset")
PLAN_SUFFIX = ".plan.json"
LABEL_JOB = "distval.job"  # on every resource and pod of one exported scenario: what collect selects pods by
CONTAINER_NAME = "suite"
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
JOBSET_REPLICATED_JOB = "node"
GPU_RESOURCE = "nvidia.com/gpu"
# A pod's hostname is one DNS label (63): "<job>-<index>", or under JobSet "<jobset>-node-0-<index>".
# 50 leaves room for JobSet's suffix and a 5-digit index.
NAME_MAX = 50
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_NODE_RANK_OPTION = re.compile(r"^--node[_-]rank=(\d+)$")
# Docker sizes (distval/config/values.py SIZE_PATTERN) in Kubernetes quantities: Docker's k, m, g are binary.
_DOCKER_UNITS = {"": "", "b": "", "k": "Ki", "m": "Mi", "g": "Gi"}


SECURITY_LEVELS = ("restricted", "none")
# A non-root uid present in no image's /etc/passwd by design (distroless' "nonroot"): the suite needs no home.
DEFAULT_RUN_AS_USER = 65532
# What a pull of a multi-GiB torch image and the scheduling may take before the scenario's own deadline starts.
DEFAULT_PULL_TIMEOUT_S = 900
# A CPU pod's requests where the scenario sets none: one CPU and 2 GiB per rank (a gloo rank of the default config
# peaks under 1 GiB here; the 16 MiB collectives' buffers, torch's own and the launcher's).
CPU_PER_RANK = 1
MEMORY_PER_RANK_MI = 2048


@dataclass(frozen=True)
class Toleration:
    key: str
    value: str | None
    effect: str | None  # NoSchedule, PreferNoSchedule, NoExecute; None: every effect

    def manifest(self) -> dict[str, str]:
        found = {"key": self.key, "operator": "Equal" if self.value is not None else "Exists"}
        if self.value is not None:
            found["value"] = self.value
        if self.effect is not None:
            found["effect"] = self.effect
        return found


@dataclass(frozen=True)
class PodOptions:
    """What a cluster asks of the pods beyond the plan (``distval export kubernetes``'s options)."""

    security: str = "restricted"  # one of SECURITY_LEVELS
    run_as_user: int = DEFAULT_RUN_AS_USER  # where the scenario names no user
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    image_pull_secrets: tuple[str, ...] = ()
    pull_timeout_s: int = DEFAULT_PULL_TIMEOUT_S


@dataclass(frozen=True)
class ExportedScenario:
    plan: ScenarioPlan
    name: str  # the Kubernetes name of its Job/JobSet, ConfigMap, Service and NetworkPolicy
    resources: tuple[dict[str, Any], ...] = ()
    refused: str | None = None  # why it has no Kubernetes form (then resources is empty)
    plan_text: str = ""  # the plan file (distval/targets/plan_file.py), whose SHA-256 every resource and pod carries

    @property
    def file_name(self) -> str:
        return f"{self.name}.yaml"

    @property
    def plan_file_name(self) -> str:
        return plan_file_name(self.name)


def plan_file_name(job: str) -> str:
    """The plan file beside a job's manifests: what collect judges its pods' logs against."""
    return f"{job}{PLAN_SUFFIX}"


def kube_names(run_id: str, slugs: Iterable[str]) -> list[str]:
    """Each scenario's Kubernetes name: ``dv-<run id>-<slug>``, a DNS-1035 label of at most NAME_MAX
    characters, unique within the export (a clash after cutting gets a number)."""
    names: list[str] = []
    for index, slug in enumerate(slugs):
        name = re.sub(r"-+", "-", f"dv-{run_id}-{slug}")[:NAME_MAX].rstrip("-")
        number = index
        while name in names:
            suffix = f"-{number}"
            name = name[: NAME_MAX - len(suffix)].rstrip("-") + suffix
            number += 1000
        names.append(name)
    return names


def quantity(docker_size: str) -> str:
    """A Docker size ("512m") as a Kubernetes quantity ("512Mi")."""
    return docker_size[:-1] + _DOCKER_UNITS[docker_size[-1].lower()] if docker_size[-1].isalpha() else docker_size


def cpu_quantity(cpus: float) -> str:
    return str(int(cpus)) if float(cpus).is_integer() else f"{math.ceil(cpus * 1000)}m"


def refusal(plan: ScenarioPlan) -> str | None:
    """Why the scenario has no Kubernetes form, or None."""
    scenario = plan.scenario
    # What the kubernetes target declares it lacks (faults, IPv6, extra networks: distval/targets/declarations.py):
    # an exported Job would run without it and pass as if it had been given.
    lacking = KUBERNETES.refusals([scenario])
    if lacking:
        return "; ".join(lacking)
    if plan.needs_node0_ip:
        return "master_addr: ip needs node 0's address before the others start; a pod's IP is not known in advance"
    if scenario.user is not None and not re.fullmatch(r"\d+(:\d+)?", scenario.user):
        return f"user {scenario.user!r}: Kubernetes runs containers as a numeric uid[:gid] only"
    unknown = placeholders_in(plan.containers) - {"subnets"}
    if unknown:
        return f"the plan needs {', '.join(sorted(unknown))}, which only the Docker Engine knows"
    return None


def _labels(plan: ScenarioPlan, name: str) -> dict[str, str]:
    # The plan's labels where Kubernetes takes them as they are; the scenario's name (which may hold '_' and
    # be 80 long) as the slug here and in full as an annotation.
    return {LABEL_MANAGED: "true", LABEL_RUN: plan.run_id, LABEL_SCENARIO: plan.slug, LABEL_JOB: name}


def _annotations(plan: ScenarioPlan, plan_sha256: str) -> dict[str, str]:
    # The plan file's hash on every resource and pod: collect reads it back from the manifests, or from the pods
    # through the API (the Job controller copies the template's; the image under test cannot change them).
    notes = {LABEL_SCENARIO: plan.scenario.name, "distval.image": plan.image, PLAN_SHA256_KEY: plan_sha256}
    ulimits = plan.containers[0].options.ulimits
    if ulimits:
        notes["distval.unmapped"] = (
            "ulimits "
            + ", ".join(f"{u.name}={u.soft}" for u in ulimits)
            + ": Kubernetes sets no per-pod ulimits; the node's container runtime defaults apply"
        )
    return notes


def _node_varying(containers: tuple[ContainerPlan, ...]) -> tuple[set[str], tuple[str, ...]]:
    """The env keys whose value is each node's rank, and node 0's argv without its node rank option. Anything
    else that differs between the nodes has no single pod template: a PlanError (a planner change to map)."""
    env_keys: set[str] = set()
    first = containers[0]
    for key, _ in first.env:
        values = [dict(c.env).get(key) for c in containers]
        if len(set(values)) > 1:
            if values != [str(c.node_rank) for c in containers]:
                raise PlanError(f"env {key} differs between nodes other than as the node rank: {values}")
            env_keys.add(key)
    argv = []
    for position, item in enumerate(first.argv):
        items = [c.argv[position] if position < len(c.argv) else None for c in containers]
        if _NODE_RANK_OPTION.match(item):
            continue  # torchrun reads PET_NODE_RANK instead
        if len(set(items)) > 1:
            raise PlanError(f"argument {position} differs between nodes: {items}")
        argv.append(item)
    if any(len(c.argv) != len(first.argv) for c in containers):
        raise PlanError("the nodes' command lines differ in length")
    return env_keys, tuple(argv)


def _pod_template(
    plan: ScenarioPlan,
    name: str,
    master: str,
    subdomain: str | None,
    pod_options: PodOptions,
    plan_sha256: str,
) -> dict[str, Any]:
    containers = plan.containers
    first = containers[0]
    node0 = re.compile(rf"\b{re.escape(first.hostname)}\b")

    def mapped(text: str) -> str:
        return node0.sub(master, text)

    env_keys, argv = _node_varying(containers)
    has_launcher = any(_NODE_RANK_OPTION.match(a) for a in first.argv)
    env: list[dict[str, Any]] = []
    for key, value in first.env:
        if key in env_keys:
            env.append({"name": key, "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}})
        else:
            env.append({"name": key, "value": mapped(value)})
    if has_launcher and len(containers) > 1:
        env.append({"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}})
    elif has_launcher:
        argv = first.argv  # one node: its rank is 0 as written
    command = [mapped(a) for a in argv]

    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    for number, copy in enumerate(first.files):
        # Named after the path ("distval", "suite", "results", "spec-json"), numbered where two would clash.
        volume = re.sub(r"[^a-z0-9]+", "-", Path(copy.path).name.lower()).strip("-")[:40] or "files"
        if any(v["name"] == volume for v in volumes) or volume == "shm":
            volume = f"{volume}-{number}"
        if copy.suite:
            items = [{"key": f"suite.{p.name}", "path": p.name} for p in sorted(suite_dir().glob("*.py"))]
            volumes.append({"name": volume, "configMap": {"name": name, "items": items}})
            mounts.append({"name": volume, "mountPath": copy.path, "readOnly": True})
        elif copy.text is None:
            volumes.append({"name": volume, "emptyDir": {}})
            mounts.append({"name": volume, "mountPath": copy.path})
        else:
            key = Path(copy.path).name
            volumes.append(
                {"name": volume, "configMap": {"name": name, "items": [{"key": key, "path": key}], "defaultMode": copy.mode}}
            )
            mounts.append({"name": volume, "mountPath": copy.path, "subPath": key, "readOnly": True})
    options = first.options
    limits: dict[str, Any] = {}
    if options.cpus is not None:
        limits["cpu"] = cpu_quantity(options.cpus)
    if options.memory is not None:
        limits["memory"] = quantity(options.memory)
    if options.gpu_device_ids:
        limits[GPU_RESOURCE] = len(options.gpu_device_ids)  # the scheduler picks which; one pod per node
    if options.shm_size is not None:
        # Docker's --shm-size: a memory-backed emptyDir at /dev/shm (a pod's default is 64 MiB, like Docker's).
        volumes.append({"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": quantity(options.shm_size)}})
        mounts.append({"name": "shm", "mountPath": "/dev/shm"})
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": plan.image,
        "command": command,
        "workingDir": first.working_dir,
        "env": env,
        "volumeMounts": mounts,
    }
    ranks = max(1, len(first.ranks))
    if not options.gpu_device_ids:
        # A CPU pod without requests is best-effort: the first evicted, and refused where a ResourceQuota asks for
        # requests. Memory is limited as requested (no overcommit to be killed for); CPU is not (no throttling).
        limits.setdefault("memory", f"{MEMORY_PER_RANK_MI * ranks}Mi")
        requests = {"cpu": limits.get("cpu", str(CPU_PER_RANK * ranks)), "memory": limits["memory"]}
    else:
        requests = {k: v for k, v in limits.items() if k != GPU_RESOURCE}
    if limits:
        container["resources"] = {"limits": limits, **({"requests": requests} if requests else {})}
    pod_security: dict[str, Any] = {}
    if options.user is not None:
        uid, _, gid = options.user.partition(":")
        container["securityContext"] = {"runAsUser": int(uid), **({"runAsGroup": int(gid)} if gid else {})}
    if pod_options.security == "restricted":
        # Pod Security "restricted" (kubernetes.io/docs/concepts/security/pod-security-standards): non-root, no
        # privilege escalation, every capability dropped, the runtime's default seccomp profile.
        user = container.get("securityContext", {}).get("runAsUser", pod_options.run_as_user)
        container["securityContext"] = {
            "runAsUser": user,
            **{k: v for k, v in container.get("securityContext", {}).items() if k == "runAsGroup"},
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        }
        pod_security = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "enableServiceLinks": False,  # no Service variables in the image's environment
        "automountServiceAccountToken": False,  # the image under test needs no API access
        "containers": [container],
        "volumes": volumes,
    }
    if pod_security:
        pod["securityContext"] = pod_security
    if pod_options.node_selector:
        pod["nodeSelector"] = dict(pod_options.node_selector)
    if pod_options.tolerations:
        pod["tolerations"] = [t.manifest() for t in pod_options.tolerations]
    if pod_options.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": secret} for secret in pod_options.image_pull_secrets]
    if subdomain is not None:
        pod["subdomain"] = subdomain
    return {"metadata": {"labels": _labels(plan, name), "annotations": _annotations(plan, plan_sha256)}, "spec": pod}


def _job_spec(plan: ScenarioPlan, template: dict[str, Any], pod_options: PodOptions) -> dict[str, Any]:
    nodes = len(plan.containers)
    return {
        "completionMode": "Indexed",
        "completions": nodes,
        "parallelism": nodes,
        "backoffLimit": 0,  # a failing rank fails the scenario, never retried into a pass
        # Kubernetes counts it from the Job's start: the image pull and scheduling come on top of the deadline.
        "activeDeadlineSeconds": math.ceil(plan.deadline_s) + pod_options.pull_timeout_s,
        "template": template,
    }


def _spec_json(plan: ScenarioPlan, name: str, master: str) -> str:
    spec = strict_json.loads(resolve(plan.suite_spec_json, {"subnets": ""}))
    node0 = re.compile(rf"\b{re.escape(plan.containers[0].hostname)}\b")
    spec = strict_json.loads(node0.sub(master, json.dumps(spec)))
    # Records on stdout, each node's first one naming its job (to tell several jobs' logs apart); what ran is the
    # plan file's, which the pods are never asked for.
    spec["stdout_records"] = {"job": name}
    return json.dumps(spec, sort_keys=True, indent=1)


def export_scenario(
    plan: ScenarioPlan, name: str, layout: str, config_path: str, pod_options: PodOptions = PodOptions()
) -> ExportedScenario:
    if layout not in LAYOUTS:
        raise PlanError(f"unknown layout {layout!r}; expected one of {', '.join(LAYOUTS)}")
    why = refusal(plan)
    if why is None and pod_options.security == "restricted" and (plan.containers[0].options.user or "").split(":")[0] == "0":
        why = "user 0 is root, which Pod Security 'restricted' refuses: another uid, or --pod-security none"
    if why is not None:
        return ExportedScenario(plan, name, refused=why)
    labels = _labels(plan, name)
    plan_file = plan_text(Origin(plan.scenario, plan.image, plan.run_id, plan.slug, config_path, name))
    plan_sha256 = sha256_text(plan_file)
    annotations = {
        **_annotations(plan, plan_sha256),
        "distval.deadline": f"{math.ceil(plan.deadline_s)} s for the scenario, {pod_options.pull_timeout_s} s more "
        "for the image pull and scheduling (activeDeadlineSeconds counts both)",
    }
    metadata = {"name": name, "labels": labels, "annotations": annotations}
    if layout == "jobset":
        master = f"{name}-{JOBSET_REPLICATED_JOB}-0-0.{name}"  # JobSet's pod hostnames and Service (its subdomain)
    else:
        master = f"{name}-0.{name}"
    spec_json = _spec_json(plan, name, master)
    suite_files = {f"suite.{p.name}": p.read_text(encoding="utf-8") for p in sorted(suite_dir().glob("*.py"))}
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": dict(metadata),
        "data": {"spec.json": spec_json, **suite_files},
    }
    resources: list[dict[str, Any]] = [config_map]
    if not plan.scenario.egress:
        resources.append(_network_policy(metadata, labels))
    if layout == "jobset":
        template = _pod_template(plan, name, master, None, pod_options, plan_sha256)
        resources.append(
            {
                "apiVersion": JOBSET_API,
                "kind": "JobSet",
                "metadata": dict(metadata),
                "spec": {
                    "network": {"enableDNSHostnames": True, "subdomain": name, "publishNotReadyAddresses": True},
                    "failurePolicy": {"maxRestarts": 0},
                    "replicatedJobs": [
                        {
                            "name": JOBSET_REPLICATED_JOB,
                            "replicas": 1,
                            "template": {"metadata": {"labels": labels}, "spec": _job_spec(plan, template, pod_options)},
                        }
                    ],
                },
            }
        )
    else:
        template = _pod_template(plan, name, master, name, pod_options, plan_sha256)
        resources.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": dict(metadata),
                "spec": {
                    "clusterIP": "None",  # headless: DNS names for the pods, no virtual IP
                    "selector": {LABEL_JOB: name},
                    # Rendezvous starts before any pod is Ready: the names must resolve at once.
                    "publishNotReadyAddresses": True,
                    "ports": [{"name": "rendezvous", "port": MASTER_PORT}, {"name": "c10d", "port": C10D_PORT}],
                },
            }
        )
        resources.append(
            {"apiVersion": "batch/v1", "kind": "Job", "metadata": dict(metadata), "spec": _job_spec(plan, template, pod_options)}
        )
    return ExportedScenario(plan, name, tuple(resources), plan_text=plan_file)


def _network_policy(metadata: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    """The scenario network's ``internal``: the pods reach each other and the cluster's DNS, nothing else."""
    own = {"matchLabels": {LABEL_JOB: labels[LABEL_JOB]}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": dict(metadata),
        "spec": {
            "podSelector": own,
            "policyTypes": ["Egress"],
            "egress": [
                {"to": [{"podSelector": own}]},
                {
                    "to": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
                    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
                },
            ],
        },
    }


def export_config(
    config: Config, run_id: str, image: str | None, layout: str, pod_options: PodOptions = PodOptions()
) -> list[ExportedScenario]:
    plan = plan_run(config, run_id, image)
    names = kube_names(run_id, (s.slug for s in plan.scenarios))
    return [export_scenario(s, name, layout, config.path, pod_options) for s, name in zip(plan.scenarios, names, strict=True)]


# libyaml's emitter where PyYAML has it: the suite's files make each scenario's YAML ~200 KB.
_SafeDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_SafeDumper):  # type: ignore[misc]
    """Plain YAML for people and kubectl: no anchors for repeated objects, files as literal blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _text(dumper: Any, value: str) -> yaml.ScalarNode:
    node: yaml.ScalarNode = dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)
    return node


_Dumper.add_representer(str, _text)


def render(exported: ExportedScenario) -> str:
    """The scenario's manifests as one multi-document YAML file (``kubectl apply -f``)."""
    return "".join(
        "---\n" + yaml.dump(resource, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1000)
        for resource in exported.resources
    )
