# aiorocketmq: one image for every role (mqnamesrv, mqbroker, mqadmin, aiorocketmq).
#   docker build -t aiorocketmq:local .
#   docker run --rm aiorocketmq:local                  # prints the help
#   docker run --rm aiorocketmq:local mqnamesrv --listen 0.0.0.0:9876
# docker-compose.yml runs a whole cluster from it; see docs/operations.md.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

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
RUN pip install . && cd / && rm -rf /src

# Run as a plain user; a broker's store lives in its home (a named volume in docker-compose.yml
# takes this directory's owner on first use).
RUN useradd --create-home --uid 10001 rocketmq \
    && mkdir -p /home/rocketmq/store \
    && chown rocketmq:rocketmq /home/rocketmq/store
USER rocketmq
WORKDIR /home/rocketmq

# 9876: name server; 10911: broker.
EXPOSE 9876 10911
CMD ["aiorocketmq", "--help"]
