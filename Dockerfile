# skewgate's image: `skewgate serve` (the default command) and `skewgate lab pki` (the compose
# demo's PKI init service; hence openssl). Build from the repository root: `docker build -t skewgate .`
#
# Three stages so that the final one holds only what runs: compiled JavaScript, production
# dependencies, the .proto files and package.json. The compiler, tap and the sources never reach it.
# Every base is the same pinned tag: one Node and one musl for build and run (no native addon is
# built, but a mismatch would be a trap the day one is).

# ---- build: full dependencies, tsc ---------------------------------------------------------
FROM node:20.19.4-alpine3.22 AS build
WORKDIR /app
# The lock file alone decides what is installed (npm ci fails if package.json disagrees with it).
# --ignore-scripts: no package's install script runs during the build; none is needed (the only
# one in the tree, protobufjs's postinstall, just prints a version-scheme warning).
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
# Only src/ is compiled: the tsconfig globs for test/ and bench/ match nothing here, and nothing
# under src/ imports from them.
COPY tsconfig.json ./
COPY src ./src
# The local compiler from the lock file (npx could otherwise go looking on the registry).
RUN node_modules/.bin/tsc -p tsconfig.json

# ---- production dependencies only ----------------------------------------------------------
# A separate stage rather than `npm prune` after the build: its layer never held dev dependencies.
FROM node:20.19.4-alpine3.22 AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error \
 && npm cache clean --force

# ---- runtime -------------------------------------------------------------------------------
FROM node:20.19.4-alpine3.22
# `skewgate lab pki` shells out to the openssl CLI. Not pinned to an apk revision: Alpine keeps
# only the newest build of a package per branch, so an exact pin breaks the build at the next
# security fix; the branch (3.22) is pinned through the base tag.
# Docker fills a new named volume from the image's directory, owner included: the PKI volume and
# the ext_proc socket volume must be writable by uid 1000, which skewgate and the PKI init run as.
RUN apk add --no-cache openssl \
 && mkdir -p /pki /run/skewgate \
 && chown node:node /pki /run/skewgate
WORKDIR /app
ENV NODE_ENV=production
# Owned by root and read-only for `node`: the process cannot rewrite its own code.
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist/src ./dist/src
# Loaded from disk at start-up by src/extproc/proto.ts (found by walking up to proto/).
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
