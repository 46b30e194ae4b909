# The harness's own image: distval and its suite, driving the host's Docker Engine through the mounted
# socket. Mounting /var/run/docker.sock gives this container control of the host's Docker Engine.
#
#   docker build --build-arg BASE=python:3.12-slim -t distval .
#   docker run --rm -v /var/run/docker.sock:/var/run/docker.sock distval run configs/default.yaml --image IMG
#
# BASE is any image with Python >= 3.10 and pip. The harness copies the suite into the containers and
# the results out through the Engine API, so nothing depends on paths of this container or the host.
# Offline builds: put the dependency wheels in wheels/ (pip download -d wheels with pyproject.toml's dependencies
# and setuptools; tests/docker_helpers.py harness_context does it for the tests)
# and pass --build-arg PIP_NO_INDEX=1.
ARG BASE=python:3.12-slim
FROM ${BASE}
ARG PIP_NO_INDEX=
ENV PIP_NO_INDEX=${PIP_NO_INDEX} PIP_BREAK_SYSTEM_PACKAGES=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
# distval's reaper image is built FROM this image where the Engine lacks it: nothing pulled, no root on the host.
ENV DISTVAL_HELPER_BASE=harness
COPY wheels/ /src/wheels/
COPY pyproject.toml README.md /src/
COPY distval /src/distval
COPY distval_suite /src/distval_suite
COPY configs /src/configs
RUN python3 -m pip install --no-cache-dir --find-links /src/wheels /src && rm -rf /src/wheels
WORKDIR /src
ENTRYPOINT ["distval"]
CMD ["run", "configs/default.yaml"]
