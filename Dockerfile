# aiorocketmq: one image for every role (mqnamesrv, mqbroker, mqadmin, aiorocketmq).
#   docker build -t aiorocketmq:local .
#   docker run --rm aiorocketmq:local                  # prints the help
#   docker run --rm aiorocketmq:local mqnamesrv --listen 0.0.0.0:9876
# docker-compose.yml runs a whole cluster from it; see docs/operations.md.
#
# Two stages: the first compiles the C speedups of the data path (a compiler is needed, and
# their absence is an error here, where a plain pip install would fall back to Python); the
# second installs the wheel it built into a slim image with no compiler.
FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*

# The package from the source tree: the metadata first, then the aiorocketmq folder and the role
# folders its links point at (aiorocketmq/broker -> ../broker, ...).
WORKDIR /src
COPY pyproject.toml README.md ./
COPY setup.py ./setup.py
COPY protocol ./protocol
COPY nameserver ./nameserver
COPY broker ./broker
COPY producer ./producer
COPY consumer ./consumer
COPY pipeline ./pipeline
COPY aiorocketmq ./aiorocketmq
RUN pip wheel --no-deps --wheel-dir /wheels . \
    && python -c "import glob, sys, zipfile; names = zipfile.ZipFile(glob.glob('/wheels/*.whl')[0]).namelist(); sys.exit(0 if any('_speedups' in n and n.endswith('.so') for n in names) else 'the C speedups did not build')"

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

COPY --from=build /wheels /wheels
RUN pip install /wheels/*.whl \
    && rm -rf /wheels \
    && python -c "import aiorocketmq.protocol._speedups"

# Run as a plain user; a broker's store lives in its home (a named volume in docker-compose.yml
# takes this directory's owner on first use).
RUN useradd --create-home --uid 10001 rocketmq \
    && mkdir -p /home/rocketmq/store \
    && chown rocketmq:rocketmq /home/rocketmq/store
USER rocketmq
WORKDIR /home/rocketmq

# 9876 / 9877: name server (gRPC / remoting); 10911 / 10912: broker (gRPC / remoting).
EXPOSE 9876 9877 10911 10912
CMD ["aiorocketmq", "--help"]
