# Jointer controller image.
#   docker build -t <registry>/jointer:0.1.0 .
# Stage 1 builds the wheel and a virtual environment with its dependencies; stage 2 carries only
# that virtual environment on a slim Python base, runs as the non-root user 65532 and has no
# compiler or build tools.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/jointer
COPY pyproject.toml README.md ./
COPY provisioner ./provisioner
COPY cloudprovider ./cloudprovider
COPY solver ./solver
COPY iam ./iam
RUN /opt/jointer/bin/pip install --upgrade pip build \
    && /opt/jointer/bin/python -m build --wheel --outdir /dist . \
    && /opt/jointer/bin/pip install /dist/*.whl \
    && /opt/jointer/bin/pip uninstall --yes build pip \
    && /opt/jointer/bin/jointer --help > /dev/null

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="jointer" \
      org.opencontainers.image.description="Karpenter-compatible, gang-aware node provisioner for Kubernetes on AWS" \
      org.opencontainers.image.source="https://github.com/jointer-dev/jointer" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="0.1.0"
ENV PATH=/opt/jointer/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=builder /opt/jointer /opt/jointer
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["jointer"]
CMD ["run"]
