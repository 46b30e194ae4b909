"""Every target distval runs a scenario on, and what each lacks (distval/targets/capabilities.py says what a
capability is). One table: the refusals of ``distval run``/``plan``/``export``, host mode's skips and the targets
page of the docs (docs/targets.md, generated from it) all derive from these rows."""

from __future__ import annotations

from distval.targets.capabilities import COLLECT, EXPORT, RUN, Lacking, TargetDeclaration

DOCKER = TargetDeclaration(
    name="docker",
    chosen_with="(the default)",
    runs="containers of the image under test on one Docker Engine (DOCKER_HOST), one bridge network per scenario",
)
ENGINES = TargetDeclaration(
    name="engines",
    chosen_with="`--hosts URL,...` (or `hosts:` with `--hosts-from-config`)",
    runs="containers of the image under test on several Docker Engines (--hosts), in each host's network",
    lacks={
        # The fault runner acts on one Engine's containers: across Engines the scenario would run without its
        # faults and its fault checks would read "this run had none".
        "faults": Lacking("the fault runner injects faults on one Engine only; run it without --hosts"),
        # The ranks use each host's network (network_mode host): no network spans the Engines, so neither an IPv6
        # one nor extra ones would exist; the scenario would run on the hosts' own networks and pass as if they had.
        "ipv6": Lacking("its ranks use each host's own network; distval makes no network across Engines"),
        "extra_networks": Lacking("its ranks use each host's own network; distval makes no network across Engines"),
        "keep_on_failure": Lacking("it keeps the containers of one Docker Engine only; run without --hosts"),
    },
)
LOCAL = TargetDeclaration(
    name="local",
    chosen_with="`--local`",
    runs="local processes with a local Python's torch (--local), no Docker, every node on this host's loopback",
    lacks={
        # Faults kill, pause or cut containers; local processes have no container to act on. The scenario is skipped
        # whole with the reason: run without its faults, its checks would pass as if they had landed.
        "faults": Lacking("faults act on containers (kill, pause, network cut), and local processes have none", skip=True),
        "ipv6": Lacking("it runs every node on this host's IPv4 loopback", skip=True),
        "extra_networks": Lacking("it runs every node on this host's loopback", skip=True),
        "keep_on_failure": Lacking("it runs local processes, which end with the run"),
        "reaper": Lacking("a watchdog process of its own kills the run's processes if distval is killed"),
        "reference": Lacking("it runs the local Python's torch, not images: there is no second image to pair with"),
        "image_environment": Lacking("its ranks start from this host's environment, not from an image's", skip=True),
        "container_image": Lacking("runs the local Python's torch"),
        "docker_engines": Lacking("runs local processes without Docker"),
    },
)
KUBERNETES = TargetDeclaration(
    name="kubernetes",
    chosen_with="`distval export kubernetes`",
    runs="an Indexed Job (or JobSet) per scenario, exported as manifests and applied by you (distval export)",
    lacks={
        "faults": Lacking("faults are injected through the Docker Engine, which a cluster does not expose"),
        "ipv6": Lacking("a pod's IP family is the cluster's, not the scenario's"),
        "extra_networks": Lacking("a pod has one network interface (several need a CNI such as Multus)"),
        "keep_on_failure": Lacking("distval does not run the pods: they stay until you delete the Job"),
        "reaper": Lacking("distval does not run the pods: you delete the Job when it is done (kubectl delete -f)"),
        "reference": Lacking("distval does not run the pods, so it cannot interleave two images' runs"),
        "docker_engines": Lacking("runs on the cluster's nodes, which place the pods"),
    },
    ways=(EXPORT, COLLECT),
)
SLURM = TargetDeclaration(
    name="slurm",
    chosen_with="`distval export slurm`, `--target slurm`",
    runs="a batch job per scenario (sbatch), one job step per node running the image under test through Slurm's "
    "OCI containers (or pyxis, Apptainer); exported, or submitted and followed by distval (--target slurm)",
    lacks={
        # Faults act through the Docker Engine on containers; a job step is no container distval can pause or cut.
        "faults": Lacking("faults are injected through the Docker Engine, and a Slurm job step is not its container"),
        # A step uses its node's own network: no scenario network exists whose family or count distval could choose.
        "ipv6": Lacking("a job step uses its node's own network; distval makes no network on a cluster"),
        "extra_networks": Lacking("a job step uses its node's own network; distval makes no network on a cluster"),
        "keep_on_failure": Lacking("the job's directory (records, output, bundles) is always kept; the job itself ends"),
        "reaper": Lacking(
            "distval cancels the job (scancel) on Ctrl-C, SIGTERM and the deadline; killed outright, the job ends at its "
            "time limit (#SBATCH --time, the scenario's deadline)"
        ),
        "reference": Lacking("not yet: the pairs of --reference are run on Docker Engines only"),
        "docker_engines": Lacking("submits to Slurm"),
    },
    ways=(RUN, EXPORT, COLLECT),
)
TARGETS = (DOCKER, ENGINES, LOCAL, KUBERNETES, SLURM)
