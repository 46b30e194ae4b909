"""What the history tests share: JSON reports of distval run made as data (the fields json_report writes that
the history reads), a night of runs with a check regression and a busbw drop, and Chromium run offline on a page
(a plain module, not a test module)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.paths import ROOT

SIZES = ((4096, "4KiB"), (1048576, "1MiB"), (16777216, "16MiB"))
IMAGE = "example/torch:nightly"


def figure(operation: str, size: int, label: str, busbw: float, efficiency: float | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {
        "operation": operation,
        "size": size,
        "label": label,
        "time_us": size / (busbw * 1e3) if busbw else 0.0,
        "algbw_gbps": busbw,
        "busbw_gbps": busbw,
        "iterations": 20,
        "world_size": 2,
        "best_time_us": size / (busbw * 1.1e3) if busbw else 0.0,
        "best_busbw_gbps": busbw * 1.1,
    }
    if efficiency is not None:
        found["efficiency"] = efficiency
    return found


def scenario(
    name: str,
    cases: list[tuple[str, str, str]],
    *,
    image: str = IMAGE,
    image_id: str | None = "sha256:0123456789abcdef",
    started_at: str | None = "2026-12-01T02:00:00Z",
    duration_s: float = 10.0,
    bandwidth: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    statuses = [status for _, status, _ in cases]
    status = "error" if "error" in statuses else "failed" if "failed" in statuses else "passed"
    return {
        "name": name,
        "suite_name": f"[{image}] {name}",
        "topology": "in-container",
        "world_size": 2,
        "backend": "gloo",
        "image": image,
        "image_id": image_id,
        "status": status,
        "duration_s": duration_s,
        "started_at": started_at,
        "properties": {"image": image, "scenario_hash": "0123abcd4567", "scenario_hash_any_image": "89ab"},
        "reproduce": None,
        "cases": [
            {"name": n, "status": s, "message": m, "duration_s": 0.5, "output": "", "skipped_ranks": [], "details": {}}
            for n, s, m in cases
        ],
        "bandwidth": bandwidth or [],
        "diagnosis": {"ranks": [], "notes": []},
        "logs": "",
    }


def report(run_id: str, scenarios: list[dict[str, Any]], exit_code: int = 0) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "run_id": run_id,
        "distval_version": "0.1.0",
        "exit_code": exit_code,
        "early_error": None,
        "engine_version": "27.5.1",
        "host": "ci-host",
        "config": "configs/default.yaml",
        "config_sha256": None,
        "sample_image": False,
        "scenarios": scenarios,
        "bandwidth_topologies": [],
    }


def night(day: int, *, allreduce: str = "passed", busbw_factor: float = 1.0, efficiency: bool = True) -> dict[str, Any]:
    """One night's report: two scenarios, 'inside' with bandwidth figures (x busbw_factor) and 'across' without."""
    started = f"2026-12-{day:02d}T02:00:00Z"
    figures = [
        figure(
            op, size, label, round((0.5 + index) * busbw_factor * (1 + day % 3 / 50), 4), 0.4 + index / 10 if efficiency else None
        )
        for op in ("all_reduce", "all_gather")
        for index, (size, label) in enumerate(SIZES)
    ]
    inside = scenario(
        "inside",
        [
            ("env", "passed", "torch 2.6.0"),
            ("all_reduce", allreduce, "ok" if allreduce == "passed" else "got 5.0"),
            ("bandwidth", "passed", "ok"),
        ],
        started_at=started,
        duration_s=20.0 + day % 2,
        bandwidth=figures,
    )
    across = scenario("across", [("env", "skipped", "no CUDA"), ("ddp", "passed", "ok")], started_at=started, duration_s=30.0)
    return report(f"night{day}", [inside, across], exit_code=0 if allreduce == "passed" else 1)


def write_reports(directory: Path, reports: list[dict[str, Any]], names: list[str] | None = None) -> list[Path]:
    paths = []
    for index, data in enumerate(reports):
        path = directory / (names[index] if names else f"{data['run_id']}.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, ensure_ascii=False))
        paths.append(path)
    return paths


# --- Chromium ---------------------------------------------------------------------------------------------

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
# Where the screenshot goes: $DISTVAL_ARTIFACTS (CI's artifact step) or tests/artifacts/ (ignored by git).
ARTIFACTS = Path(os.environ.get("DISTVAL_ARTIFACTS") or ROOT / "tests" / "artifacts")
# Nothing outside: every connection goes to a proxy on a closed port, every name fails to resolve.
OFFLINE = ("--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-bypass-list=<-loopback>")
BROWSER_TIMEOUT_S = 90


def chromium() -> str | None:
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


@dataclass(frozen=True)
class Opened:
    dom: str  # the DOM after load (--dump-dom)
    log: str  # Chromium's stderr with --enable-logging=stderr: console messages, CSP violations


def open_offline(browser: str, page: Path, profile: Path, *, screenshot: Path | None = None) -> Opened:
    """``page`` opened from its file:// URL by headless Chromium with the network off: the DOM and the log; with
    ``screenshot``, a second load writes a PNG there (Chromium does one of the two per process)."""
    common = [
        browser,
        "--headless",
        "--disable-gpu",
        "--no-sandbox",  # root in a container: Chromium's sandbox needs user namespaces it may not have
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        *OFFLINE,
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
    ]
    url = page.resolve().as_uri()
    dumped = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S, check=False)
    assert dumped.returncode == 0, dumped.stderr[-4000:]
    log = dumped.stderr
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        shot = subprocess.run(
            [*common, f"--screenshot={screenshot}", "--window-size=1400,2400", "--hide-scrollbars", url],
            capture_output=True,
            text=True,
            timeout=BROWSER_TIMEOUT_S,
            check=False,
        )
        assert shot.returncode == 0 and screenshot.is_file(), shot.stderr[-4000:]
        log += shot.stderr
    return Opened(dumped.stdout, log)
