"""distval.targets.kubernetes.export: the manifests of ``distval export kubernetes``, validated offline and golden-tested.

Validation: the core kinds (ConfigMap, Service, NetworkPolicy, Job) with kubernetes-validate, strict (unknown
fields rejected), against the newest and the oldest Kubernetes its bundled schemas cover (1.37 and 1.25 in
kubernetes-validate 1.37.0: no network). JobSet is a CRD, in none of those: its object is validated with
jsonschema against the v1alpha2 openAPIV3Schema of JobSet's own CRD (tests/data/jobset, with unknown fields
rejected as the API server's strict field validation does; its CEL rules are not evaluated), and its Job
template again as a batch/v1 Job with kubernetes-validate.

Regenerate the golden files after an intended change:

    DISTVAL_UPDATE_GOLDEN=1 python -m pytest tests/targets/kubernetes/test_kube_export.py -p no:cacheprovider
"""

from __future__ import annotations

import copy
import functools
import gzip
import hashlib
import json
import math
import os
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

import distval.cli.main
from distval.config import load_config, parse_config
from distval.plan.identity import scenario_hash
from distval.targets.docker.runtime import suite_dir
from distval.targets.kubernetes.collect import read_plans
from distval.targets.kubernetes.export import (
    COMPLETION_INDEX,
    DEFAULT_PULL_TIMEOUT_S,
    GPU_RESOURCE,
    NAME_MAX,
    ExportedScenario,
    PodOptions,
    Toleration,
    export_config,
    kube_names,
    quantity,
    render,
)
from distval.targets.origin import Origin, origin_data, origin_from_data
from distval.targets.plan_file import PLAN_SHA256_KEY, sha256_text
from tests.paths import DATA, GOLDEN, ROOT

CONFIGS = ("default.yaml", "rendezvous.yaml", "nccl.yaml", "gpu-smoke.yaml")
LAYOUTS = ("indexed-job", "jobset")
K8S_VERSIONS = ("1.37.0", "1.25.0")  # the newest and the oldest kubernetes-validate 1.37.0 bundles
JOBSET_SCHEMA = DATA / "jobset" / "jobsets-v1alpha2.openapi.json.gz"
IMAGE = "registry.example/pytorch:2.6"
LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def exported(config: str, layout: str) -> list[ExportedScenario]:
    return export_config(load_config(str(ROOT / "configs" / config)), "r1", IMAGE, layout)


def _strict(schema: Any) -> Any:
    """The CRD schema with unknown fields rejected (the API server's fieldValidation=Strict; a structural
    schema leaves them to pruning otherwise)."""
    if isinstance(schema, dict):
        schema = {k: _strict(v) for k, v in schema.items()}
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@functools.cache
def core_validator(kind: str, api_version: str, version: str) -> jsonschema.Draft202012Validator:
    """kubernetes-validate's strict schema of a kind, built once (its validate() reads and parses the schema
    files, megabytes, on every call); the same files and the same validator class as kubernetes_validate.validate."""
    from referencing import Registry, Resource

    directory = f"kubernetes-json-schema/v{version}-local-strict"
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema = kubernetes_validate.utils.schema_contents(f"{directory}/{kind.lower()}-{group}.json", version)
    definitions = kubernetes_validate.utils.schema_contents(f"{directory}/_definitions.json", version)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


@pytest.fixture(scope="module")
def jobset_validator() -> jsonschema.Draft7Validator:
    schema = _strict(json.loads(gzip.decompress(JOBSET_SCHEMA.read_bytes())))
    return jsonschema.Draft7Validator(schema)


def validate(resource: dict[str, Any], jobset_validator: jsonschema.Draft7Validator) -> list[str]:
    """What was validated, as "<kind> against <schema>"; raises on the first violation."""
    done = []
    if resource["kind"] == "JobSet":
        jobset_validator.validate(resource)
        done.append("JobSet against JobSet's CRD schema")
        for replicated in resource["spec"]["replicatedJobs"]:
            job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"}, **replicated["template"]}
            for version in K8S_VERSIONS:
                core_validator("Job", "batch/v1", version).validate(job)
            done.append("JobSet's Job template as batch/v1 Job")
        return done
    for version in K8S_VERSIONS:
        core_validator(resource["kind"], resource["apiVersion"], version).validate(resource)
    return [f"{resource['kind']} against Kubernetes {', '.join(K8S_VERSIONS)}"]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("config", CONFIGS)
def test_every_exported_manifest_validates_against_the_kubernetes_schema(
    config: str, layout: str, jobset_validator: jsonschema.Draft7Validator
) -> None:
    scenarios = [s for s in exported(config, layout) if s.refused is None]
    assert scenarios, "nothing exported"
    kinds = {"ConfigMap", "NetworkPolicy", *(("Service", "Job") if layout == "indexed-job" else ("JobSet",))}
    for scenario in scenarios:
        assert {r["kind"] for r in scenario.resources} == kinds, scenario.name
        # What a user applies is the rendered YAML: validate that, read back.
        for resource in yaml.load_all(render(scenario), Loader=LOADER):
            assert validate(resource, jobset_validator)


def test_kubernetes_validate_rejects_a_broken_job() -> None:
    """The validation can fail: a misspelt field, a wrong type, each caught with what was wrong, by the package's
    own validate() and by the validators built once above alike."""
    job = next(r for r in exported("default.yaml", "indexed-job")[1].resources if r["kind"] == "Job")
    misspelt = copy.deepcopy(job)
    misspelt["spec"]["completionMode"] = "Indexed"
    misspelt["spec"]["template"]["spec"]["containers"][0]["comand"] = ["python3"]
    with pytest.raises(kubernetes_validate.ValidationError, match="comand"):
        kubernetes_validate.validate(misspelt, "1.37.0", strict=True)
    wrong_type = copy.deepcopy(job)
    wrong_type["spec"]["completions"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError, match="'two' is not of type 'integer'"):
        kubernetes_validate.validate(wrong_type, "1.37.0", strict=True)
    for version in K8S_VERSIONS:
        kubernetes_validate.validate(job, version, strict=True)
        with pytest.raises(jsonschema.ValidationError, match="comand"):
            core_validator("Job", "batch/v1", version).validate(misspelt)
        with pytest.raises(jsonschema.ValidationError, match="'two' is not of type 'integer'"):
            core_validator("Job", "batch/v1", version).validate(wrong_type)


def test_the_jobset_schema_rejects_a_broken_jobset(jobset_validator: jsonschema.Draft7Validator) -> None:
    jobset = next(r for r in exported("default.yaml", "jobset")[1].resources if r["kind"] == "JobSet")
    unknown = copy.deepcopy(jobset)
    unknown["spec"]["network"]["publishNotReady"] = True
    with pytest.raises(jsonschema.ValidationError, match="publishNotReady"):
        jobset_validator.validate(unknown)
    wrong_type = copy.deepcopy(jobset)
    wrong_type["spec"]["replicatedJobs"][0]["replicas"] = "1"
    with pytest.raises(jsonschema.ValidationError, match="'1' is not of type 'integer'"):
        jobset_validator.validate(wrong_type)


def test_kubernetes_validate_works_offline_from_its_bundled_schemas() -> None:
    """No network: the schemas are files of the package (1.25 .. 1.37 in 1.37.0)."""
    versions = kubernetes_validate.utils.all_versions()
    assert "1.25.0" in versions and "1.37.0" in versions, versions
    schemas = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / "v1.37.0-local-strict"
    assert (schemas / "job-batch-v1.json").is_file()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_golden_manifests_of_one_scenario(layout: str) -> None:
    """The cross-container scenario of the default config, whole, with the suite's files named instead of
    written out (their content is checked against distval_suite/ below)."""
    scenario = exported("default.yaml", layout)[1]
    text = render(scenario)
    for path in sorted(suite_dir().glob("*.py")):
        body = path.read_text(encoding="utf-8")
        config_map = next(r for r in scenario.resources if r["kind"] == "ConfigMap")
        assert config_map["data"][f"suite.{path.name}"] == body
    shown = [
        {**r, "data": {k: (v if k == "spec.json" else f"<suite/{k[6:]}>") for k, v in r["data"].items()}}
        if r["kind"] == "ConfigMap"
        else r
        for r in scenario.resources
    ]
    # The origin names the config by the path it was loaded from: the checkout's, which differs per clone.
    # The plan file's SHA-256 covers that path too.
    golden_text = (
        render(ExportedScenario(scenario.plan, scenario.name, tuple(shown)))
        .replace(str(ROOT), "<checkout>")
        .replace(sha256_text(scenario.plan_text), "<plan file sha256>")
    )
    golden = GOLDEN / f"kube_{layout}.yaml"
    if os.environ.get("DISTVAL_UPDATE_GOLDEN") == "1":
        golden.write_text(golden_text, encoding="utf-8")
    assert golden_text == golden.read_text(encoding="utf-8"), (
        "manifests changed: rerun with DISTVAL_UPDATE_GOLDEN=1, review the diff"
    )
    assert text.count("\n---\n") + 1 == len(scenario.resources)


def _pod(scenario: ExportedScenario) -> dict[str, Any]:
    workload = next(r for r in scenario.resources if r["kind"] in ("Job", "JobSet"))
    job_spec = workload["spec"] if workload["kind"] == "Job" else workload["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert job_spec["completionMode"] == "Indexed" and job_spec["backoffLimit"] == 0
    assert job_spec["completions"] == job_spec["parallelism"] == len(scenario.plan.containers)
    # Kubernetes counts it from the Job's start: the pull and scheduling allowance comes on top of the deadline.
    assert job_spec["activeDeadlineSeconds"] == math.ceil(scenario.plan.scenario.timeout_s) + DEFAULT_PULL_TIMEOUT_S
    pod: dict[str, Any] = job_spec["template"]["spec"]
    return pod


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("config", CONFIGS)
def test_the_pods_run_the_plan(config: str, layout: str) -> None:
    """Command, environment and spec are the plan's: only node 0's name, the node rank (from the completion
    index) and the spec's stdout_records and subnets differ; no Docker name is left anywhere."""
    for scenario in exported(config, layout):
        if scenario.refused is not None:
            continue
        plan = scenario.plan
        first = plan.containers[0]
        master = f"{scenario.name}-0.{scenario.name}" if layout == "indexed-job" else f"{scenario.name}-node-0-0.{scenario.name}"
        container = _pod(scenario)["containers"][0]
        text = render(scenario)
        assert not any(c.name in text for c in plan.containers), f"{scenario.name}: a Docker container name is left"
        multi = len(plan.containers) > 1
        expected_argv = [a.replace(first.hostname, master) for a in first.argv if not (multi and a.startswith("--node_rank="))]
        assert container["command"] == expected_argv
        env = {e["name"]: e for e in container["env"]}
        for key, value in first.env:
            varying = len({dict(c.env)[key] for c in plan.containers}) > 1
            if varying:
                assert env[key] == {"name": key, "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}}
            else:
                assert env[key]["value"] == value.replace(first.hostname, master), key
        launcher_rank = any(a.startswith("--node_rank=") for a in first.argv)
        assert ("PET_NODE_RANK" in env) == (launcher_rank and multi), scenario.name
        config_map = next(r for r in scenario.resources if r["kind"] == "ConfigMap")
        spec = json.loads(config_map["data"]["spec.json"])
        planned = json.loads(plan.suite_spec_json.replace(first.hostname, master))
        # The pods name their job, nothing more: what ran is the plan file's (distval/targets/plan_file.py).
        assert spec.pop("stdout_records") == {"job": scenario.name}
        assert json.loads(scenario.plan_text)["origin"] == origin_data(
            Origin(plan.scenario, plan.image, plan.run_id, plan.slug, plan_config(config), scenario.name)
        )
        assert spec.pop("subnets") == "" and planned.pop("subnets") == "{subnets}"
        assert spec == planned


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_resource_and_pod_carries_the_plan_files_sha256(layout: str, tmp_path: Path) -> None:
    """The export writes each job's plan file beside its manifests, and its SHA-256 into every resource's annotations
    and the pod template's (which the Job controller copies onto each pod): collect checks the plan file against it,
    from the manifests or from the pods through the API."""
    for scenario in exported("default.yaml", layout):
        if scenario.refused is not None:
            continue
        digest = hashlib.sha256(scenario.plan_text.encode()).hexdigest()
        for resource in scenario.resources:
            assert resource["metadata"]["annotations"][PLAN_SHA256_KEY] == digest, resource["kind"]
        workload = next(r for r in scenario.resources if r["kind"] in ("Job", "JobSet"))
        job_spec = workload["spec"] if workload["kind"] == "Job" else workload["spec"]["replicatedJobs"][0]["template"]["spec"]
        assert job_spec["template"]["metadata"]["annotations"][PLAN_SHA256_KEY] == digest
    argv = ["export", "kubernetes", str(ROOT / "configs" / "default.yaml"), "--image", "x/y:1", "-o", str(tmp_path)]
    argv += ["--layout", layout, "--run-id", "r1"]
    assert distval.cli.main.main(argv) == 0
    plans = read_plans(tmp_path)
    assert sorted(p.origin.job for p in plans) == sorted(p.name.removesuffix(".yaml") for p in tmp_path.glob("*.yaml"))
    assert {p.origin.image for p in plans} == {"x/y:1"} and all(p.job_uid is None for p in plans)


def plan_config(config: str) -> str:
    return str(ROOT / "configs" / config)


@pytest.mark.parametrize("config", ("nccl.yaml", "gpu-smoke.yaml"))
def test_gpu_scenarios_ask_for_their_gpus_and_shared_memory(config: str) -> None:
    for scenario in exported(config, "indexed-job"):
        container = _pod(scenario)["containers"][0]
        gpus = scenario.plan.scenario.gpus_per_node
        assert container.get("resources", {}).get("limits", {}).get(GPU_RESOURCE) == (gpus or None), scenario.name
        shm = next((v for v in _pod(scenario)["volumes"] if v["name"] == "shm"), None)
        options = scenario.plan.containers[0].options
        if options.shm_size is None:
            assert shm is None
        else:
            assert shm == {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": quantity(options.shm_size)}}


def test_gloo_scenarios_ask_for_no_gpu() -> None:
    for scenario in exported("default.yaml", "indexed-job"):
        assert GPU_RESOURCE not in json.dumps(scenario.resources)


def test_resources_user_and_refusals(tmp_path: Path) -> None:
    config = tmp_path / "k.yaml"
    config.write_text(
        "version: 1\nscenarios:\n"
        "  - {name: sized, topology: cross-container, nodes: 2, cpus: 1.5, memory: 512m, shm_size: 1g, user: '1000:1000',"
        " checks: [env]}\n"
        "  - {name: by-name, topology: in-container, world_size: 2, user: nobody, checks: [env]}\n"
        "  - {name: by-ip, topology: cross-container, nodes: 2, master_addr: ip, checks: [env]}\n"
        "  - {name: homed, topology: cross-container, nodes: 2, extra_networks: 1, checks: [env]}\n"
        "  - {name: open, topology: in-container, world_size: 2, egress: true, checks: [env]}\n"
    )
    sized, by_name, by_ip, homed, open_ = export_config(load_config(str(config)), "r1", IMAGE, "indexed-job")
    container = _pod(sized)["containers"][0]
    assert container["resources"] == {
        "limits": {"cpu": "1500m", "memory": "512Mi"},
        "requests": {"cpu": "1500m", "memory": "512Mi"},
    }
    assert container["securityContext"] == {
        "runAsUser": 1000,
        "runAsGroup": 1000,
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}} in _pod(sized)["volumes"]
    assert by_name.refused == "user 'nobody': Kubernetes runs containers as a numeric uid[:gid] only"
    assert by_ip.refused is not None and by_ip.refused.startswith("master_addr: ip needs node 0's address")
    assert homed.refused == (
        "scenario homed asks for multi-homed nodes (extra_networks:); the kubernetes target cannot give it: a pod has "
        "one network interface (several need a CNI such as Multus)"
    )
    assert by_name.resources == by_ip.resources == homed.resources == ()
    # egress: true is an open network in Docker: no NetworkPolicy; the others get one.
    assert "NetworkPolicy" not in {r["kind"] for r in open_.resources}
    assert "NetworkPolicy" in {r["kind"] for r in sized.resources}


# Pod Security Standards, "restricted" (kubernetes.io/docs/concepts/security/pod-security-standards, v1.25+): the
# controls a pod template must meet, checked offline as the admission controller would.
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    """What Pod Security "restricted" refuses in ``pod`` (a pod spec), one line each; [] when it admits it."""
    found = []
    context = pod.get("securityContext", {})
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            found.append(f"{key}")
    for volume in pod.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            found.append(f"volume {volume['name']}: {sorted(kinds)}")
    pod_seccomp = context.get("seccompProfile", {}).get("type")
    for container in pod.get("containers", []) + pod.get("initContainers", []):
        own = container.get("securityContext", {})
        name = container["name"]
        if own.get("privileged"):
            found.append(f"{name}: privileged")
        if own.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation must be false")
        if "ALL" not in own.get("capabilities", {}).get("drop", []):
            found.append(f"{name}: capabilities must drop ALL")
        if set(own.get("capabilities", {}).get("add", [])) - {"NET_BIND_SERVICE"}:
            found.append(f"{name}: capabilities added")
        if not own.get("runAsNonRoot", context.get("runAsNonRoot")):
            found.append(f"{name}: runAsNonRoot must be true")
        if own.get("runAsUser", context.get("runAsUser")) == 0:
            found.append(f"{name}: runAsUser 0")
        if own.get("seccompProfile", {}).get("type", pod_seccomp) not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}: seccompProfile must be RuntimeDefault or Localhost")
        if any(port.get("hostPort") for port in container.get("ports", [])):
            found.append(f"{name}: hostPort")
    return found


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("config", CONFIGS)
def test_every_exported_pod_meets_pod_security_restricted(config: str, layout: str) -> None:
    for scenario in exported(config, layout):
        if scenario.refused is None:
            assert restricted_violations(_pod(scenario)) == [], scenario.name


def test_the_restricted_check_can_fail() -> None:
    """Each control refuses a pod that breaks it, and --pod-security none gives such a pod (the image's own user)."""
    (scenario, *_) = export_config(
        load_config(str(ROOT / "configs" / "default.yaml")), "r1", IMAGE, "indexed-job", PodOptions(security="none")
    )
    assert restricted_violations(_pod(scenario)) == [
        "suite: allowPrivilegeEscalation must be false",
        "suite: capabilities must drop ALL",
        "suite: runAsNonRoot must be true",
        "suite: seccompProfile must be RuntimeDefault or Localhost",
    ]
    good = _pod(exported("default.yaml", "indexed-job")[0])
    for edit, why in [
        (lambda p: p.update(hostNetwork=True), "hostNetwork"),
        (lambda p: p["volumes"].append({"name": "h", "hostPath": {"path": "/"}}), "volume h: ['hostPath']"),
        (lambda p: p["containers"][0]["securityContext"].update(runAsUser=0), "suite: runAsUser 0"),
        (lambda p: p["containers"][0]["securityContext"]["capabilities"].update(add=["SYS_ADMIN"]), "suite: capabilities added"),
        (lambda p: p["securityContext"].update(seccompProfile={"type": "Unconfined"}), "suite: seccompProfile must be"),
    ]:
        pod = copy.deepcopy(good)
        edit(pod)
        assert any(line.startswith(why) for line in restricted_violations(pod)), why


def test_cpu_pods_request_what_their_ranks_need_and_the_cluster_options_reach_the_pods() -> None:
    options = PodOptions(
        run_as_user=4242,
        node_selector=(("node.kubernetes.io/instance-type", "c7i.4xlarge"),),
        tolerations=(Toleration("dedicated", "ml", "NoSchedule"), Toleration("spot", None, None)),
        image_pull_secrets=("regcred",),
        pull_timeout_s=120,
    )
    config = load_config(str(ROOT / "configs" / "default.yaml"))
    for scenario in export_config(config, "r1", IMAGE, "indexed-job", options):
        pod = _pod_of(scenario)
        ranks = len(scenario.plan.containers[0].ranks)
        container = pod["containers"][0]
        assert container["resources"] == {
            "limits": {"memory": f"{2048 * ranks}Mi"},
            "requests": {"cpu": str(ranks), "memory": f"{2048 * ranks}Mi"},
        }
        assert container["securityContext"]["runAsUser"] == 4242
        assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "c7i.4xlarge"}
        assert pod["tolerations"] == [
            {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
            {"key": "spot", "operator": "Exists"},
        ]
        assert pod["imagePullSecrets"] == [{"name": "regcred"}]
        job = next(r for r in scenario.resources if r["kind"] == "Job")
        assert job["spec"]["activeDeadlineSeconds"] == math.ceil(scenario.plan.deadline_s) + 120
        assert job["metadata"]["annotations"]["distval.deadline"].startswith(f"{math.ceil(scenario.plan.deadline_s)} s ")


def _pod_of(scenario: ExportedScenario) -> dict[str, Any]:
    job = next(r for r in scenario.resources if r["kind"] == "Job")
    pod: dict[str, Any] = job["spec"]["template"]["spec"]
    return pod


def test_a_root_user_is_refused_under_restricted_and_exported_with_none(tmp_path: Path) -> None:
    config = tmp_path / "k.yaml"
    scenario = "{name: root, topology: in-container, world_size: 2, user: '0', checks: [env]}"
    config.write_text(f"version: 1\nscenarios:\n  - {scenario}\n")
    (refused,) = export_config(load_config(str(config)), "r1", IMAGE, "indexed-job")
    assert refused.refused == "user 0 is root, which Pod Security 'restricted' refuses: another uid, or --pod-security none"
    (allowed,) = export_config(load_config(str(config)), "r1", IMAGE, "indexed-job", PodOptions(security="none"))
    assert allowed.refused is None and _pod_of(allowed)["containers"][0]["securityContext"] == {"runAsUser": 0}


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--node-selector", "no-equals", "expected KEY=VALUE"),
        ("--node-selector", "bad key=x", "expected a label key"),
        ("--node-selector", "k=" + "v" * 64, "expected a label value"),
        ("--toleration", "dedicated=ml:NoWay", "expected the effect NoSchedule, PreferNoSchedule, NoExecute"),
        ("--toleration", "a\nb", "expected a label key"),
        ("--image-pull-secret", "Reg_Cred", "expected a Kubernetes name"),
        ("--run-as-user", "0", "expected a uid from 1 to"),
        ("--pod-security", "baseline", "invalid choice"),
    ],
)
def test_cluster_options_are_checked_in_one_line(
    option: str, value: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(ROOT / "configs" / "default.yaml")
    argv = ["export", "kubernetes", config, "--image", IMAGE, "-o", str(tmp_path / "o"), option, value]
    assert distval.cli.main.main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert expected in line, line
    assert not (tmp_path / "o").exists()


def test_names_are_dns_labels_and_unique() -> None:
    """Scenario names may hold '_' and '.', differ only in those or in case, be 80 long and start with a digit:
    their Kubernetes names are still DNS-1035 labels, short enough for JobSet's pod hostnames, and unique."""
    names = ["a_b", "a.b", "A-B", "9lives", "x" * 80, "x" * 79 + "y", "x" * 30 + "_", "x" * 30, "-".join(["ab"] * 20)]
    body = "".join(f"  - {{name: '{n}', topology: in-container, world_size: 2, checks: [env]}}\n" for n in names)
    config = parse_config("version: 1\nscenarios:\n" + body, "names.yaml")
    result = export_config(config, "a" * 16, IMAGE, "jobset")
    kube = [s.name for s in result]
    assert len(set(kube)) == len(kube), kube
    for name in kube:
        assert DNS_1035.match(name) and len(name) <= NAME_MAX, name
        assert len(f"{name}-node-0-99999") <= 63
    assert kube_names("r", ["s", "s", "s"]) == ["dv-r-s", "dv-r-s-1", "dv-r-s-2"]


def test_memory_quantities() -> None:
    assert [quantity(s) for s in ("512m", "2g", "64k", "1000b", "4096")] == ["512Mi", "2Gi", "64Ki", "1000", "4096"]


@pytest.mark.parametrize("config", CONFIGS)
def test_the_origin_round_trips_to_the_same_plan(config: str) -> None:
    """collect plans each scenario again from what the logs carry: the same Scenario, the same scenario hash."""
    for scenario in exported(config, "indexed-job"):
        plan = scenario.plan
        origin = Origin(plan.scenario, plan.image, plan.run_id, plan.slug, config, scenario.name)
        back = origin_from_data(json.loads(json.dumps(origin_data(origin))))
        assert back == origin
        assert scenario_hash(back.plan()) == scenario_hash(plan)


def test_a_bad_origin_is_refused_with_what_was_expected() -> None:
    with pytest.raises(ValueError, match="expected a distval origin object of version 1"):
        origin_from_data({"version": 2})
    with pytest.raises(ValueError, match="expected a distval origin object"):
        origin_from_data({"version": 1, "scenario": {"name": "x"}})


def test_export_command_writes_one_file_per_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code = distval.cli.main.main(
        ["export", "kubernetes", str(ROOT / "configs" / "rendezvous.yaml"), "--image", IMAGE, "--out", str(out), "--run-id", "r1"]
    )
    captured = capsys.readouterr()
    assert code == 0
    files = sorted(p.name for p in out.iterdir())
    assert len(files) == 2 * 21 and captured.out.count(".yaml: ") == 21  # each job's manifests and plan file
    assert captured.err.count("distval: not exported: ") == 10
    assert "distval: not exported: by-ip.static: master_addr: ip" in captured.err


@pytest.mark.parametrize("option", ["-o", "--output-dir", "--out"])
def test_export_takes_run_s_output_option_and_its_first_name(option: str, tmp_path: Path) -> None:
    """-o/--output-dir as for distval run; --out, the option's first name, still works. No report lands there."""
    out = tmp_path / "manifests"
    config = str(ROOT / "configs" / "default.yaml")
    assert distval.cli.main.main(["export", "kubernetes", config, "--image", IMAGE, option, str(out), "--run-id", "r1"]) == 0
    assert sorted(p.name.split(".", 1)[1] for p in out.iterdir()) == ["plan.json"] * 3 + ["yaml"] * 3  # per scenario


def test_export_command_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "k.yaml"
    config.write_text(
        "version: 1\nscenarios:\n  - {name: by-ip, topology: cross-container, nodes: 2, master_addr: ip, checks: [env]}\n"
    )
    assert distval.cli.main.main(["export", "kubernetes", str(config), "--image", IMAGE, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"distval: no scenario of {config} has a Kubernetes form (see the lines above)"
    assert distval.cli.main.main(["export", "kubernetes", str(config)]) == 2
    assert "the following arguments are required: --image" in capsys.readouterr().err
    config.write_text("version: 1\nscenarios:\n  - {name: x, topology: sideways, world_size: 2, checks: [env]}\n")
    assert distval.cli.main.main(["export", "kubernetes", str(config), "--image", IMAGE]) == 2
    assert "topology" in capsys.readouterr().err


def test_the_same_export_twice_is_the_same_bytes() -> None:
    """A run id fixes every name: re-exporting writes the same files (reviewable diffs, stable goldens)."""
    first = [render(s) for s in exported("rendezvous.yaml", "jobset") if s.refused is None]
    assert first == [render(s) for s in exported("rendezvous.yaml", "jobset") if s.refused is None]


def test_what_the_kubernetes_target_lacks_is_refused_never_exported_without_it(tmp_path: Path) -> None:
    """Was: a fault scenario or an IPv6 one was exported as a plain Job, which would pass without its faults or
    on the cluster's IPv4 network."""
    config = tmp_path / "c.yaml"
    config.write_text(
        "version: 1\nscenarios:\n  - {name: v6, topology: cross-container, world_size: 2, ipv6: true, checks: [env]}\n"
    )
    (v6,) = export_config(load_config(str(config)), "r1", IMAGE, "indexed-job")
    assert v6.refused is not None and "asks for an IPv6 network (ipv6: true); the kubernetes target cannot" in v6.refused
    faulty = export_config(load_config(str(ROOT / "configs" / "faults.yaml")), "r1", IMAGE, "indexed-job")
    assert faulty and all("asks for injected faults (faults:); the kubernetes target cannot" in (s.refused or "") for s in faulty)
    assert v6.resources == () and all(s.resources == () for s in faulty)
