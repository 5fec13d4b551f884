import { Command, CommanderError } from 'commander';
import { ConfigError, packageVersion, type Env } from '@svc/contracts';
import {
  contractCommand,
  credentialRequestCommand,
  healthCommand,
  prPreflightCommand,
} from './adapter/commands.js';
import { adapterFailure, EXIT_USAGE, SUBCOMMANDS, type CommandOutput } from './adapter/shapes.js';
import { loadConfig } from './config.js';
import { BrokerError } from './errors.js';
import { startBroker } from './server.js';

/**
 * `auth-broker serve` runs the service; the other subcommands are the client adapter. Adapter
 * output is one JSON document on standard output; the exit code is 0 on success, 1 on a
 * structured failure and 2 on a usage or validation error.
 */
function program(env: Env): Command {
  const root = new Command('auth-broker')
    .description('Auth broker for code-host operations, and its client adapter')
    .version(
      `auth-broker ${packageVersion(new URL('../package.json', import.meta.url))}`,
      '-V, --version',
      'print the version and exit',
    )
    .exitOverride()
    .configureOutput({ writeErr: () => undefined });

  root
    .command('serve')
    .description('run the broker service (AUTH_BROKER_* environment)')
    .action(serve);

  root
    .command('contract')
    .description('print the dry-run contract surface')
    .action(() => print(contractCommand(env)));

  root
    .command('health')
    .description('check the broker named by SVC_AUTH_BROKER_URL / AUTH_BROKER_URL')
    .option('--dry-run', 'print the planned request without sending it', false)
    .action((options: { dryRun: boolean }) => print(healthCommand(env, options.dryRun)));

  root
    .command('credential-request')
    .description('ask the broker to perform one allowlisted operation with its credential')
    .requiredOption('--operation <operation>', 'allowlisted operation, e.g. codehost.issue.list')
    .requiredOption('--repo <owner/repo>', 'repository in the broker allowlist')
    .option('--number <n>', 'issue or pull request number for read operations')
    .option('--dry-run', 'print the planned request without sending it', false)
    .action((options: { operation: string; repo: string; number?: string; dryRun: boolean }) =>
      print(credentialRequestCommand(env, options)),
    );

  root
    .command('pr-preflight')
    .description('prove PR readiness through the broker (no PR is created)')
    .requiredOption('--repo <owner/repo>', 'repository in the broker allowlist')
    .requiredOption('--base <branch>', 'target branch')
    .requiredOption('--head <branch>', 'branch with the change')
    .requiredOption('--issue <number>', 'issue the PR closes')
    .option('--dry-run', 'print the planned request without sending it', false)
    .action(
      (options: { repo: string; base: string; head: string; issue: string; dryRun: boolean }) =>
        print(prPreflightCommand(env, options)),
    );
  return root;
}

async function print(pending: Promise<CommandOutput>): Promise<void> {
  const { exitCode, output } = await pending;
  process.stdout.write(`${JSON.stringify(output, null, 2)}\n`);
  process.exitCode = exitCode;
}

async function serve(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`auth-broker: ${error.message}`);
      process.exit(2);
    }
    throw error;
  }
  const broker = await startBroker(config);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    broker.logger.info({ signal }, 'shutting down');
    broker.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
}

/** Every variable the broker and its adapter read (config.ts, adapter/environment.ts). */
const ENVIRONMENT_HELP = `
Environment of \`serve\`:
  AUTH_BROKER_HOST, AUTH_BROKER_PORT      where to listen (default 127.0.0.1:8081)
  AUTH_BROKER_CODEHOST_CREDENTIAL_REF     file:<path> or env:<NAME> of the code-host credential
  AUTH_BROKER_CODEHOST_CONFIGURED         false turns the code host off with a reference set
  AUTH_BROKER_CODEHOST_API_URL            the code host's REST API (default GitHub's)
  AUTH_BROKER_UPSTREAM_TIMEOUT_MS, AUTH_BROKER_UPSTREAM_RETRIES   calls to the code host
  AUTH_BROKER_ALLOWED_REPOS               owner/repo,... the broker may act on
  AUTH_BROKER_TRUSTED_CIDRS               callers allowed, by address
  AUTH_BROKER_ALLOWED_HOSTS               Host header names accepted besides its own
  AUTH_BROKER_AUDIT_LOG                   the JSONL audit file
  AUTH_BROKER_FEATURE_CONFIG              the feature-configuration file
  AUTH_BROKER_LOG_LEVEL                   pino level (info)
Environment of the client commands:
  SVC_AUTH_BROKER_URL, AUTH_BROKER_URL    the broker to call (the first one set wins)
  CODEHOST_CLI_TOKEN, CODEHOST_TOKEN      never used (a failing command says whether they are set)
`;

async function main(argv: string[]): Promise<void> {
  const root = program(process.env);
  // Help is asked for, so it goes to standard output (and before anything else is parsed).
  if (argv[2] === '--help' || argv[2] === '-h') {
    process.stdout.write(root.helpInformation() + ENVIRONMENT_HELP);
    return;
  }
  if (argv.length <= 2) {
    process.stderr.write(root.helpInformation());
    process.exitCode = EXIT_USAGE;
    return;
  }
  try {
    await root.parseAsync(argv);
  } catch (error) {
    if (!(error instanceof CommanderError)) throw error;
    if (error.exitCode === 0) return; // --help, --version
    const command = SUBCOMMANDS.find((name) => name === argv[2]) ?? null;
    const failure = new BrokerError('validation-failed', error.message.replace(/^error: /, ''), {
      degradedReason: 'usage',
      next: ['auth-broker --help'],
    });
    const { output } = adapterFailure(command, failure);
    process.stdout.write(`${JSON.stringify(output, null, 2)}\n`);
    process.exitCode = EXIT_USAGE;
  }
}

main(process.argv).catch((error: unknown) => {
  console.error('auth-broker:', error instanceof Error ? error.message : error);
  process.exit(1);
});
