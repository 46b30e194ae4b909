# The harness's own image: distval and its suite, driving the host's Docker Engine through the
# mounted socket (mounting the socket gives this container control of the host's Engine).
# BASE is any image with Python >= 3.10 and pip; users pass a registry image, for example
#   docker build --build-arg BASE=python:3.12-slim -t distval .
# Nothing here pulls by itself: with a locally built base, the build stays offline.
ARG BASE=python:3.12-slim
FROM ${BASE}
COPY pyproject.toml README.md /src/
COPY harness /src/harness
COPY suite /src/suite
COPY configs /src/configs
RUN python3 -m pip install --no-cache-dir /src
WORKDIR /src
ENTRYPOINT ["distval"]
CMD ["run", "configs/default.yaml"]
