"""The torch probe of the docker kind's ``distval doctor``: ``distval_suite/image_probe.py`` run in the image as distval
runs its ranks (the suite copied in through the Engine API, no network, no capability, no new privileges, the
image's own user, a deadline, removed afterwards); its answer is read by distval/doctor/torch_probe.py."""

from __future__ import annotations

from distval.doctor.torch_probe import PROBE_MODULE, PROBE_TIMEOUT_S, TorchFacts, read_answer
from distval.engine_protocol import EngineAPI
from distval.plan.nodes import suite_copies
from distval.plan.specs import ContainerOptions, ContainerPlan
from distval.targets.docker.plan import CONTAINER_FILE_MODES, CONTAINER_ROOT
from distval.targets.docker.runtime import files_archive

# As the host probes (distval/targets/engines/plan.py): less than the ranks get, never more.
PROBE_CAP_DROP = ("ALL",)
PROBE_SECURITY_OPT = ("no-new-privileges",)
PROBE_ENV = (("PYTHONDONTWRITEBYTECODE", "1"),)


def probe_plan(image: str, python: str, run_id: str) -> ContainerPlan:
    """The probe container: the image under test on purpose, with the suite copied in and nothing else."""
    return ContainerPlan(
        name=f"distval-{run_id}-torch-probe",
        hostname="",
        node_rank=-1,
        ranks=(),
        argv=(python, "-m", PROBE_MODULE),
        env=PROBE_ENV,
        labels=(),
        working_dir=CONTAINER_ROOT,
        image=image,
        options=ContainerOptions(cap_drop=PROBE_CAP_DROP, security_opt=PROBE_SECURITY_OPT),
        files=suite_copies(CONTAINER_ROOT, CONTAINER_FILE_MODES),
        network_mode="none",
    )


def probe_image(engine: EngineAPI, plan: ContainerPlan, timeout_s: float = PROBE_TIMEOUT_S) -> TorchFacts | str:
    """Run the probe container to its end (killed at the deadline) and read its answer; whatever happens, every
    container of the doctor's run is removed. Engine errors leave as EngineError."""
    try:
        handle = engine.create_container(plan)
        engine.put_archive(handle, "/", files_archive(plan.files))
        engine.start(handle)
        if not engine.wait_stopped(handle, timeout_s):
            engine.kill(handle)
            return f"the probe did not finish within {timeout_s:g} s (killed)"
        state = engine.state(handle)
        stdout, stderr = engine.logs(handle)
    finally:
        engine.remove_labelled()
    return read_answer(state.exit_code, stdout, stderr)
