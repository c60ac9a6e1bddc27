# skewgate's image: `skewgate serve` (the default command), and the other service commands
# (validate, explain, skew, health, envoy-config, gateway-cert; hence openssl). Build from the
# repository root: `docker build -t skewgate .`
#
# The final stage holds only the service: compiled JavaScript of src/, production dependencies,
# the .proto files and package.json. The compiler, tap, the sources and the harness (harness/: the
# lab, the fakes, the demo, the compose renderer) never reach it. The compose demo's PKI init runs
# the harness from a stage of its own, `--target pki` (docker-compose.yml asks for it by name).
# Every base is the same pinned tag: one Node and one musl for build and run (no native addon is
# built, but a mismatch would be a trap the day one is).

# ---- build: full dependencies, tsc over src/ -----------------------------------------------
FROM node:20.19.4-alpine3.22 AS build
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

# ---- build-harness: src/ and harness/, for the PKI init only -------------------------------
FROM build AS build-harness
COPY harness ./harness
RUN node_modules/.bin/tsc -p tsconfig.json

# ---- production dependencies only ----------------------------------------------------------
# A separate stage rather than `npm prune` after the build: its layer never held dev dependencies.
FROM node:20.19.4-alpine3.22 AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error \
 && npm cache clean --force

# ---- pki: the compose demo's one-shot PKI init (`skewgate-lab lab pki`) --------------------
# Not the service image: it holds the harness. Docker fills a new named volume from the image's
# directory, owner included, and this is the first container to mount the PKI volume and the
# ext_proc socket volume: both must be writable by uid 1000, which skewgate and this init run as.
FROM node:20.19.4-alpine3.22 AS pki
RUN apk add --no-cache openssl \
 && mkdir -p /pki /run/skewgate \
 && chown node:node /pki /run/skewgate
WORKDIR /app
ENV NODE_ENV=production
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build-harness /app/dist ./dist
COPY package.json ./
USER node
ENTRYPOINT ["node", "/app/dist/harness/cli/main.js"]
CMD ["lab", "pki", "--dir", "/pki"]

# ---- runtime: the service ------------------------------------------------------------------
FROM node:20.19.4-alpine3.22
# `skewgate gateway-cert` shells out to the openssl CLI. Not pinned to an apk revision: Alpine
# keeps only the newest build of a package per branch, so an exact pin breaks the build at the
# next security fix; the branch (3.22) is pinned through the base tag.
# The same two folders as the pki stage, in case this image is the first to mount the volumes.
RUN apk add --no-cache openssl \
 && mkdir -p /pki /run/skewgate \
 && chown node:node /pki /run/skewgate
WORKDIR /app
ENV NODE_ENV=production
# Owned by root and read-only for `node`: the process cannot rewrite its own code.
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist/src ./dist/src
# Loaded from disk at start-up by src/extproc/proto.ts: proto/ beside package.json (the package root).
COPY proto ./proto
# packageRoot() recognises the install by its name, and telemetry reports its version.
COPY package.json ./
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
