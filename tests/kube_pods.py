"""An exported scenario's pods run as Docker containers, as a cluster would run them (no cluster here).

``pods_plan`` reads the manifests ``distval export kubernetes`` wrote (Indexed Job layout) and makes the
ScenarioPlan that distval/targets/docker/runtime.py executes against the real Engine: one container per pod with the pod
template's command, environment (the completion index filled in where the downward API gives it), its
securityContext (the uid, every capability dropped, no new privileges, as Pod Security "restricted" has it), the
ConfigMap's files at their mount paths, emptyDirs as directories, and the pod's DNS name
``<job>-<index>.<service>`` as its container name (Docker's DNS resolves it on the network; the hostname is
``<job>-<index>``, as Kubernetes sets it). The containers' stdout and stderr are then what ``kubectl logs``
shows of each pod.

``python -m tests.kube_pods`` records such logs of the default config on the 2.6 fixture into tests/data/kube/.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from distval.labels import LABEL_MANAGED, LABEL_NODE, LABEL_RUN, LABEL_SCENARIO
from distval.plan.identity import with_hashes
from distval.plan.model import CreateContainer, CreateNetwork, LearnSubnets, ScenarioPlan, StartContainer, Step
from distval.plan.specs import ContainerOptions, ContainerPlan, FileCopy, NetworkPlan
from distval.results.outcome import ScenarioOutcome
from distval.run.events import NoEvents
from distval.targets.docker.runtime import run_scenario
from distval.targets.kubernetes.export import COMPLETION_INDEX, GPU_RESOURCE, ExportedScenario, render
from distval.targets.origin import origin_from_data
from tests.paths import DATA

KUBE_DATA = DATA / "kube"
_DOCKER_SIZE = {"Ki": "k", "Mi": "m", "Gi": "g"}


def _size(quantity: str) -> str:
    return quantity[:-2] + _DOCKER_SIZE[quantity[-2:]] if quantity[-2:] in _DOCKER_SIZE else quantity


def pods_plan(manifests: str, plan_text: str) -> ScenarioPlan:
    """``plan_text``: the plan file exported beside the manifests (the scenario, which the manifests only map)."""
    resources = {r["kind"]: r for r in yaml.safe_load_all(manifests)}
    job, config_map = resources["Job"], resources["ConfigMap"]
    service = resources["Service"]["metadata"]["name"]
    data = config_map["data"]
    base = origin_from_data(json.loads(plan_text)["origin"]).plan()
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    volumes = {v["name"]: v for v in pod["volumes"]}
    files: list[FileCopy] = []
    shm = None
    for mount in container["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "emptyDir" in volume:
            if mount["mountPath"] == "/dev/shm":
                shm = _size(volume["emptyDir"]["sizeLimit"])
            else:
                files.append(FileCopy(mount["mountPath"], 0o777))
        elif "subPath" in mount:
            files.append(FileCopy(mount["mountPath"], 0o644, text=data[mount["subPath"]]))
        else:
            files.append(FileCopy(mount["mountPath"], 0o755))
            files += [
                FileCopy(f"{mount['mountPath']}/{i['path']}", 0o644, text=data[i["key"]]) for i in volume["configMap"]["items"]
            ]
    limits = container.get("resources", {}).get("limits", {})
    cpu = limits.get("cpu")
    # The container's securityContext as a kubelet applies it (Docker's seccomp default is RuntimeDefault's).
    security = container.get("securityContext", {})
    user = None
    if "runAsUser" in security:
        user = str(security["runAsUser"]) + (f":{security['runAsGroup']}" if "runAsGroup" in security else "")
    cap_drop = ("ALL",) if "ALL" in security.get("capabilities", {}).get("drop", []) else ()
    security_opt = ("no-new-privileges",) if security.get("allowPrivilegeEscalation") is False else ()
    labels = ((LABEL_MANAGED, "true"), (LABEL_RUN, base.run_id), (LABEL_SCENARIO, base.scenario.name))
    containers = []
    for index in range(job["spec"]["completions"]):
        env = []
        for item in container["env"]:
            if "value" in item:
                env.append((item["name"], item["value"]))
            else:
                assert item["valueFrom"]["fieldRef"]["fieldPath"] == COMPLETION_INDEX, item
                env.append((item["name"], str(index)))
        planned = base.containers[index]
        containers.append(
            ContainerPlan(
                name=f"{job['metadata']['name']}-{index}.{service}",
                hostname=f"{job['metadata']['name']}-{index}",
                node_rank=index,
                ranks=planned.ranks,
                argv=tuple(container["command"]),
                env=tuple(env),
                labels=labels + ((LABEL_NODE, str(index)),),
                working_dir=container["workingDir"],
                image=container["image"],
                networks=(service,),
                options=ContainerOptions(
                    cpus=None if cpu is None else float(cpu.rstrip("m")) / (1000 if cpu.endswith("m") else 1),
                    memory=_size(limits["memory"]) if "memory" in limits else None,
                    shm_size=shm,
                    gpu_device_ids=tuple(str(i) for i in range(int(limits.get(GPU_RESOURCE, 0)))),
                    user=user,
                    cap_drop=cap_drop,
                    security_opt=security_opt,
                ),
                files=tuple(files),
                results_dir=planned.results_dir,
            )
        )
    steps: list[Step] = [CreateNetwork(service), LearnSubnets(service)]
    steps += [CreateContainer(c.name) for c in containers]
    steps += [StartContainer(c.name) for c in reversed(containers)]
    network = NetworkPlan(name=service, internal=True, labels=labels)
    return with_hashes(
        ScenarioPlan(base.scenario, base.run_id, base.slug, base.image, (network,), tuple(containers), tuple(steps))
    )


def run_pods(engine: Any, manifests: str, plan_text: str) -> ScenarioOutcome:
    return run_scenario(engine, pods_plan(manifests, plan_text), NoEvents())


def pod_logs(outcome: ScenarioOutcome) -> dict[str, str]:
    """Each pod's log as ``kubectl logs`` gives it (stdout, then stderr: their interleaving is lost here)."""
    return {c.name.split(".")[0]: c.stdout + c.stderr for c in outcome.containers}


def save(outcome: ScenarioOutcome, out: Path, exported: ExportedScenario) -> None:
    """Each pod's log (``<pod>.log``), the job's plan file and manifests as the export wrote them, and, for
    comparison, what the Docker path reads (``<job>.outcome.json``: each container's exit code and result files)."""
    assert outcome.setup_error is None, outcome.setup_error
    out.mkdir(parents=True, exist_ok=True)
    (out / exported.plan_file_name).write_text(exported.plan_text, encoding="utf-8")
    (out / exported.file_name).write_text(render(exported), encoding="utf-8")
    for pod, log in pod_logs(outcome).items():
        (out / f"{pod}.log").write_text(log, encoding="utf-8")
    containers = [
        {
            "name": c.name,
            "node_rank": c.node_rank,
            "ranks": list(c.ranks),
            "exit_code": c.exit_code,
            "killed_at_deadline": c.killed_at_deadline,
            "result_files": {name: data.decode() for name, data in sorted(c.result_files.items())},
        }
        for c in outcome.containers
    ]
    job = outcome.containers[0].name.split(".")[1]
    (out / f"{job}.outcome.json").write_text(json.dumps({"containers": containers}, indent=1, sort_keys=True) + "\n")


def record(image: str, out: Path, names: list[str]) -> None:
    """Export the default config's scenarios (all, or those named) for ``image``, run their pods in the Engine,
    save each pod's log and the Docker outcome."""
    from distval.config import load_config
    from distval.targets.docker.engine import Engine
    from distval.targets.kubernetes.export import export_config

    engine = Engine("kube-rec")
    config = load_config("configs/default.yaml")  # relative: the logs name it as a user's would
    for exported in export_config(config, "kube-rec", image, "indexed-job"):
        if names and exported.plan.scenario.name not in names:
            continue
        outcome = run_pods(engine, render(exported), exported.plan_text)
        save(outcome, out, exported)
        print(f"{exported.name}: exit codes {[c.exit_code for c in outcome.containers]} -> {out}")


if __name__ == "__main__":
    # python -m tests.kube_pods IMAGE OUT_DIR [SCENARIO...]
    record(sys.argv[1], Path(sys.argv[2]), sys.argv[3:])
