# syntax=docker/dockerfile:1
# kmirror: multi-stage build. The builder compiles librdkafka (rdkafka's default mklove build,
# with SSL and zstd) and kmirror; the runtime is a slim Debian with only the shared libraries
# kmirror links against, running as a non-root user.

FROM rust:1.95-slim-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential pkg-config libssl-dev zlib1g-dev python3 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
# librdkafka with kmirror's producer patch (vendor/rdkafka-sys/PATCHES.md), built from source.
COPY vendor ./vendor
COPY src ./src
COPY templates ./templates
COPY static ./static
COPY openapi ./openapi
# Cargo checks every declared target's path, tests included, even for `--bin`.
COPY tests ./tests
RUN cargo build --release --locked --bin kmirror \
 && strip target/release/kmirror

FROM debian:bookworm-slim AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates libssl3 zlib1g curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin kmirror
COPY --from=build /src/target/release/kmirror /usr/local/bin/kmirror
COPY kmirror.example.toml /etc/kmirror/kmirror.example.toml
USER 10001:10001
EXPOSE 8080
ENV KMIRROR_LISTEN=0.0.0.0:8080
# /healthz is public: process up and serving.
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
  CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1
ENTRYPOINT ["/usr/local/bin/kmirror"]
# Configure with KMIRROR_* variables, or mount a file and run `serve --config /etc/kmirror/kmirror.toml`.
CMD ["serve"]
