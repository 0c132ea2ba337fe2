# loadgen (client, simulator and the NVML exporter) for docker-compose.yml's demo and nvml profiles.
FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml README.md* ./
COPY loadgen ./loadgen
COPY exporters ./exporters
# pyproject names README.md as the long description: make sure one exists
RUN test -f README.md || touch README.md; pip install --no-cache-dir ".[nvml]" && rm -rf /src/build
USER nobody
WORKDIR /tmp
ENTRYPOINT ["loadgen"]
