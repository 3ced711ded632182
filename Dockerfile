# The pylog broker image: `pylog-broker` on a volume at /var/lib/pylog, as a non-root user.
#
#   docker build -t pylog .                      # from PyPI on python:3.12-slim
#   bash ci/build_image.sh                       # pylog's own build: a wheelhouse from the host, and a local
#                                                # Debian base when python:3.12-slim cannot be pulled
#   docker run -p 9092:9092 pylog                # a broker at localhost:9092
#
# The broker needs no Spark: the image installs pylog's base dependencies only.
ARG BASE_IMAGE=python:3.12-slim
FROM ${BASE_IMAGE}

# a directory of wheels inside the build context (ci/build_image.sh) to install from instead of PyPI
ARG PYLOG_WHEELS=""

ENV PATH=/opt/pylog/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# iproute2 (tc netem) and iptables: network faults for tests (docker exec -u root, NET_ADMIN)
RUN if ! command -v tc >/dev/null 2>&1 || ! command -v iptables >/dev/null 2>&1; then \
        apt-get update && apt-get install -y --no-install-recommends iproute2 iptables \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && python3 -m venv /opt/pylog \
    && groupadd --system pylog \
    && useradd --system --gid pylog --home-dir /var/lib/pylog --shell /usr/sbin/nologin pylog \
    && mkdir -p /var/lib/pylog && chown pylog:pylog /var/lib/pylog

COPY . /src
RUN if [ -n "$PYLOG_WHEELS" ]; then \
        /opt/pylog/bin/pip install --no-cache-dir --no-index --find-links "/src/$PYLOG_WHEELS" pylog; \
    else \
        /opt/pylog/bin/pip install --no-cache-dir /src; \
    fi \
    && rm -rf /src \
    && /opt/pylog/bin/python -c "import broker_sim.server.broker"

USER pylog
VOLUME /var/lib/pylog
EXPOSE 9092
# a real ApiVersions request, not a port probe
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python3", "-m", "broker_sim.tools.healthcheck", "127.0.0.1:9092"]
ENTRYPOINT ["pylog-broker"]
CMD ["--data-dir", "/var/lib/pylog", \
     "--config", "listeners=PLAINTEXT://0.0.0.0:9092", \
     "--config", "advertised.listeners=PLAINTEXT://localhost:9092"]
