"""Against a real Kubernetes cluster: export, apply, wait, collect through the API. Skipped here (no cluster:
kind and k3s need images from a registry), with the reason; it runs where KUBECONFIG names a cluster,
DISTVAL_KUBE_IMAGE an image the cluster can pull and the kubernetes client is installed:

    KUBECONFIG=~/.kube/config DISTVAL_KUBE_IMAGE=registry.example/torch:2.6 \
        python -m pytest tests/targets/kubernetes/test_kube_cluster.py
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Any

import pytest

from distval.config import load_config
from distval.labels import LABEL_RUN
from distval.results.outcome import PASSED
from distval.targets.kubernetes.collect import KubernetesPods, read_api, read_plans, summarize_sources
from distval.targets.kubernetes.export import export_config, render
from tests.paths import ROOT

NAMESPACE = os.environ.get("DISTVAL_KUBE_NAMESPACE", "default")


def _requirements() -> tuple[Any, str]:
    if not os.environ.get("KUBECONFIG"):
        pytest.skip("KUBECONFIG is not set: no Kubernetes cluster to run the exported jobs on (none is reachable here)")
    image = os.environ.get("DISTVAL_KUBE_IMAGE")
    if not image:
        pytest.skip("DISTVAL_KUBE_IMAGE is not set: the image under test, as the cluster pulls it")
    kubernetes = pytest.importorskip("kubernetes", reason="the kubernetes Python client is not installed")
    return kubernetes, image


def test_default_config_passes_on_a_real_cluster(tmp_path: Path) -> None:
    kubernetes, image = _requirements()
    from kubernetes import utils

    kubernetes.config.load_kube_config()
    api = kubernetes.client.ApiClient()
    core, batch = kubernetes.client.CoreV1Api(api), kubernetes.client.BatchV1Api(api)
    run_id = f"t{secrets.token_hex(3)}"
    exported = export_config(load_config(str(ROOT / "configs" / "default.yaml")), run_id, image, "indexed-job")
    for scenario in exported:  # what distval export kubernetes writes: collect judges against the plan files
        (tmp_path / scenario.plan_file_name).write_text(scenario.plan_text, encoding="utf-8")
        (tmp_path / scenario.file_name).write_text(render(scenario), encoding="utf-8")
    plans = {p.origin.job: p for p in read_plans(tmp_path)}
    try:
        for scenario in exported:
            for resource in scenario.resources:
                utils.create_from_dict(api, resource, namespace=NAMESPACE)
        for scenario in exported:
            deadline = time.monotonic() + scenario.plan.deadline_s + 300  # image pulls and scheduling on top
            while time.monotonic() < deadline:
                job = batch.read_namespaced_job(scenario.name, NAMESPACE)
                if job.status.succeeded == len(scenario.plan.containers) or job.status.failed:
                    break
                time.sleep(5)
            sources, failure = read_api(KubernetesPods(), NAMESPACE, plans[scenario.name])
            summary = summarize_sources(sources, [plans[scenario.name]], from_api=True, job_failure=failure)
            (result,) = summary.scenarios
            assert result.status == PASSED, [(c.name, c.status, c.message) for c in result.cases if c.status != PASSED]
    finally:
        selector = f"{LABEL_RUN}={run_id}"
        for job in batch.list_namespaced_job(NAMESPACE, label_selector=selector).items:
            batch.delete_namespaced_job(job.metadata.name, NAMESPACE, propagation_policy="Background")
        for service in core.list_namespaced_service(NAMESPACE, label_selector=selector).items:
            core.delete_namespaced_service(service.metadata.name, NAMESPACE)
        for config_map in core.list_namespaced_config_map(NAMESPACE, label_selector=selector).items:
            core.delete_namespaced_config_map(config_map.metadata.name, NAMESPACE)
        networking = kubernetes.client.NetworkingV1Api(api)
        for policy in networking.list_namespaced_network_policy(NAMESPACE, label_selector=selector).items:
            networking.delete_namespaced_network_policy(policy.metadata.name, NAMESPACE)
