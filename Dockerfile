# One image for every service; the compose file picks the service with SERVICE.
# Services run from TypeScript source with tsx, so there is no separate build output.
FROM node:22-bookworm-slim AS deps
WORKDIR /app
ENV npm_config_update_notifier=false
COPY package.json package-lock.json .npmrc ./
COPY packages ./packages
COPY services ./services
COPY prisma ./prisma
COPY prisma.config.ts tsconfig.base.json tsconfig.json ./
COPY scripts ./scripts
RUN npm ci && npm run -s db:generate

FROM node:22-bookworm-slim
WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends curl ca-certificates && rm -rf /var/lib/apt/lists/*
# Owned by the user the services run as: migrations write a derived schema under node_modules/.cache.
COPY --from=deps --chown=node:node /app /app
ENV NODE_ENV=production
USER node
# SERVICE: gateway | agent-worker | memory | scripted-model
ENV SERVICE=gateway
CMD ["sh", "-c", "exec node --import tsx services/$SERVICE/src/index.ts"]
