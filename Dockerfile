# syntax=docker/dockerfile:1
# ctxd: build in a full Rust image, run from a slim Debian image as an unprivileged user.

FROM rust:1.95-bookworm AS build
WORKDIR /src
# Dependencies first, so that source edits do not rebuild them.
COPY Cargo.toml Cargo.lock ./
RUN mkdir -p src benches \
 && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
 && for bench in append compact tokenizers; do echo 'fn main() {}' > "benches/$bench.rs"; done \
 && cargo build --release --locked \
 && rm -rf src benches
COPY src src
COPY migrations migrations
COPY benches benches
RUN touch src/main.rs src/lib.rs && cargo build --release --locked --bin ctxd

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/ctxd --create-home ctxd
COPY --from=build /src/target/release/ctxd /usr/local/bin/ctxd
USER 10001
WORKDIR /var/lib/ctxd
ENV CTXD_LISTEN=0.0.0.0:8080
EXPOSE 8080
VOLUME ["/var/lib/ctxd"]
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
  CMD ["ctxd", "healthcheck"]
ENTRYPOINT ["ctxd"]
CMD ["serve"]
