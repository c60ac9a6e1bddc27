# skewgate's image: `skewgate serve` (the default command), and the other service commands
# (validate, explain, skew, health, envoy-config, gateway-cert). Build from the
# repository root: `docker build -t skewgate .`
#
# The final stage holds only the service: compiled JavaScript of src/, production dependencies,
# the .proto files and package.json. The compiler, tap, the sources and the harness (harness/: the
# lab, the fakes, the demo, the compose renderer) never reach it. The compose demo's one-shots that
# need the harness (the PKI, Envoy's bootstraps) run from a stage of their own, `--target harness`
# (docker-compose.yml asks for it by name).
# Every base is the same pinned tag: one Node and one glibc for build and run (no native addon is
# built, but a mismatch would be a trap the day one is). Debian, not Alpine: node 20.20.2 is the
# last Node 20 image, and a Debian base can be stood in for on a machine with no registry
# (scripts/demo-images.sh builds it from Debian's packages); Alpine's would need its mirror.

# ---- build: full dependencies, tsc over src/ -----------------------------------------------
FROM node:20.20.2-bookworm-slim AS build
WORKDIR /app
# The lock file alone decides what is installed (npm ci fails if package.json disagrees with it).
# --ignore-scripts: no package's install script runs during the build; none is needed (the only
# one in the tree, protobufjs's postinstall, just prints a version-scheme warning).
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
# Only src/ is compiled: the tsconfig globs for harness/, test/ and bench/ match nothing here,
# and nothing under src/ imports from them (eslint's boundary rule, npm test).
COPY tsconfig.json ./
COPY src ./src
# The local compiler from the lock file (npx could otherwise go looking on the registry).
RUN node_modules/.bin/tsc -p tsconfig.json

# ---- build-harness: src/ and harness/, for the compose one-shots only ----------------------
FROM build AS build-harness
COPY harness ./harness
RUN node_modules/.bin/tsc -p tsconfig.json

# ---- production dependencies only ----------------------------------------------------------
# A separate stage rather than `npm prune` after the build: its layer never held dev dependencies.
FROM node:20.20.2-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error \
 && npm cache clean --force

# ---- runtime-base: what both images run on ----------------------------------------------
# Docker fills a new named volume from the image's directory, owner included, and the compose
# demo's one-shots (harness stage) are the first containers to mount the PKI, ext_proc socket and
# Envoy bootstrap volumes: all must be writable by uid 1000, which skewgate and they run as.
FROM node:20.20.2-bookworm-slim AS runtime-base
RUN mkdir -p /pki /run/skewgate /run/envoy \
 && chown node:node /pki /run/skewgate /run/envoy
WORKDIR /app
ENV NODE_ENV=production
# Owned by root and read-only for `node`: the process cannot rewrite its own code.
COPY --from=deps /app/node_modules ./node_modules
# packageRoot() recognises the install by its name, and telemetry reports its version.
COPY package.json ./

# ---- harness: the compose demo's one-shots ---------------------------------------------------
# `skewgate-lab lab pki` (the default command) writes the PKI; `skewgate envoy-config` and
# `skewgate-lab envoy-baseline` render both Envoys' bootstraps at start. Not the service image: it
# holds the harness.
# openssl: the harness's PKI (`lab pki`) shells out to the openssl CLI; the service does not
# (`skewgate gateway-cert` signs with Node's crypto), so only this stage installs it. Not pinned to
# a Debian revision: the suite (bookworm) is pinned through the tag, and an exact pin breaks the
# build at the next security update.
FROM runtime-base AS harness
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends openssl >/dev/null \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build-harness /app/dist ./dist
USER node
ENTRYPOINT ["node", "/app/dist/harness/cli/main.js"]
CMD ["lab", "pki", "--dir", "/pki"]

# ---- runtime: the service ------------------------------------------------------------------
FROM runtime-base
COPY --from=build /app/dist/src ./dist/src
# `skewgate` on PATH (as package.json's bin names it), so that `kubectl exec … -- skewgate status`
# and `crictl exec … skewgate status` work as written; with the config at /etc/skewgate/skewgate.yaml
# or named by SKEWGATE_CONFIG, they need no --config either (src/cli/config-file.ts).
RUN chmod 0755 /app/dist/src/cli/main.js \
 && ln -s /app/dist/src/cli/main.js /usr/local/bin/skewgate
# Loaded from disk at start-up by src/extproc/proto.ts: proto/ beside package.json (the package root).
COPY proto ./proto
# uid 1000 in the node images.
USER node
# Prometheus metrics, when the config's telemetry section enables them (the compose demo does).
# The ext_proc listener is a unix socket in the compose demo, so there is nothing else to expose.
EXPOSE 9464
# No HEALTHCHECK here: `skewgate health --config <file>` is the check (grpc.health.v1, as Envoy
# asks it), but the config path is the deployment's choice; docker-compose.yml and the Kubernetes
# manifests under deploy/ each run it with theirs.
# node as PID 1 is fine here: `skewgate serve` installs its own SIGTERM/SIGINT handlers
# (graceful shutdown), so `docker stop` does not wait for the kill timeout.
ENTRYPOINT ["node", "/app/dist/src/cli/main.js"]
CMD ["serve", "--config", "/deploy/skewgate.yaml"]
