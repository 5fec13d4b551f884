import type { FastifyInstance } from 'fastify';
import { Redactor, type Env } from '@svc/contracts';
import type { DestinationStream } from 'pino';
import { buildApp } from './app.js';
import type { BrokerConfig } from './config.js';
import { WebProbeSentinel } from './features/web-probe-sentinel.js';
import { createLogger, type Logger } from './logging.js';

export interface StartOptions {
  /** Environment for `env:<NAME>` credential references; default process.env. */
  env?: Env;
  logDestination?: DestinationStream;
}

export interface RunningBroker {
  /** Base URL, e.g. http://127.0.0.1:8081 */
  url: string;
  port: number;
  app: FastifyInstance;
  logger: Logger;
  sentinel: WebProbeSentinel | null;
  close(): Promise<void>;
}

/** Start the broker on the configured address, and the sentinel when the feature is enabled. */
export async function startBroker(
  config: BrokerConfig,
  options: StartOptions = {},
): Promise<RunningBroker> {
  const redactor = new Redactor();
  const logger = createLogger({
    level: config.logLevel,
    redactor,
    ...(options.logDestination ? { destination: options.logDestination } : {}),
  });
  let sentinel: WebProbeSentinel | null = null;
  const app = await buildApp({
    config,
    logger,
    redactor,
    env: options.env ?? process.env,
    sentinel: () => sentinel,
  });
  await app.listen({ host: config.host, port: config.port });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const url = `http://${urlHost(config.host)}:${port}`;
  if (config.features.webProbeSentinel) {
    sentinel = new WebProbeSentinel({
      config: config.features.webProbeSentinel,
      urls: [`${url}/health`],
    });
    sentinel.start();
  }
  logger.info({ url, phase: 'p0' }, 'auth broker listening');
  return {
    url,
    port,
    app,
    logger,
    get sentinel() {
      return sentinel;
    },
    async close() {
      await sentinel?.stop();
      await app.close();
    },
  };
}

/** The address to reach a listener on: wildcard binds are reached over loopback. */
function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}
