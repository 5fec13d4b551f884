import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { ApiClient, Redactor } from '@svc/contracts';
import { colourWanted } from './colour.js';
import { loadCliConfig, type CliConfig, type GlobalFlags } from './config.js';
import { describeFailure, EXIT, type Failure } from './errors.js';
import { Output } from './output.js';

/** What one command invocation works with, built from the global flags and the environment. */
export interface Invocation {
  config: CliConfig;
  client: ApiClient;
  out: Output;
}

/** An action may answer an exit code (a followed turn that failed); nothing means success. */
export type Action<A extends unknown[]> = (inv: Invocation, ...args: A) => Promise<number | void>;

/** The clients' version: the one in packages/cli/package.json (src/ and dist/ sit beside it). */
export const CLI_VERSION = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    version: string;
  }
).version;

/** Every variable the clients read (config.ts, colour.ts), as `--help` lists them. */
const ENVIRONMENT_HELP = `
Environment:
  SVC_MANAGER_URL  the manager's base URL (default http://127.0.0.1:8080; --url wins)
  SVC_API_KEY      the API key sent as a bearer token (--token wins)
  NO_COLOR         set: never colour the output
  FORCE_COLOR      set (not 0): colour the human output even off a terminal

Exit codes: 0 success, 1 client fault, 2 usage (nothing sent), 3 the manager answered a failure,
4 the manager could not be reached; --follow: 5 the turn failed, 6 it was cancelled.`;

/** `--json` among the flags (before a `--` that ends them). */
function asksForJson(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).includes('--json');
}

/**
 * The program skeleton shared by `queue`, `sessions` and `runs`: global flags, one redactor for
 * every printed line (it learns the token before anything is sent), usage errors as exit 2.
 */
export class Cli {
  readonly redactor = new Redactor();
  readonly program: Command;
  private exitCode: number = EXIT.ok;
  private json = false;

  constructor(name: string, description: string) {
    this.program = new Command(name)
      .description(description)
      .version(`${name} ${CLI_VERSION}`, '-V, --version', 'print the version and exit')
      .option('--url <url>', 'manager URL (default SVC_MANAGER_URL, else http://127.0.0.1:8080)')
      .option('--token <token>', 'API key (default SVC_API_KEY)')
      .option('--json', 'print JSON (the default when standard output is not a terminal)')
      .addHelpText('after', ENVIRONMENT_HELP)
      .exitOverride()
      .configureOutput({
        writeErr: (text) => process.stderr.write(this.redactor.redact(text)),
        // Usage errors are one line like every other failure, naming their kind; under --json
        // they are the same JSON object as every other failure, on standard output.
        outputError: (text, write) => {
          const message = `${text.replace(/^error: /, '').trim()} (see ${name} --help)`;
          if (this.json) this.printJsonFailure({ kind: 'usage', message });
          else write(`${name}: usage: ${message}\n`);
        },
      });
  }

  /** Wrap a command action: load the configuration, then run it with a client and output. */
  action<A extends unknown[]>(fn: Action<A>) {
    return async (...args: unknown[]): Promise<void> => {
      const command = args.at(-1) as Command;
      const flags = command.optsWithGlobals<GlobalFlags>();
      const config = loadCliConfig(flags);
      this.redactor.add(config.token).add(config.urlPassword);
      const client = new ApiClient({ baseUrl: config.url, token: config.token });
      const out = new Output(
        this.redactor,
        config.json,
        !config.json && colourWanted(process.stdout),
      );
      const code = await fn({ config, client, out }, ...(args.slice(0, -1) as A));
      if (typeof code === 'number') this.exitCode = code;
    };
  }

  private printJsonFailure(f: Pick<Failure, 'kind' | 'message'>): void {
    const body = JSON.stringify({ error: { kind: f.kind, message: f.message } });
    process.stdout.write(`${this.redactor.redact(body)}\n`);
  }

  /** Parse and run; the exit code says how it went (packages/cli/README.md). */
  async run(argv: readonly string[]): Promise<number> {
    if (argv.length === 0) {
      this.program.outputHelp({ error: true });
      return EXIT.usage;
    }
    this.json = asksForJson(argv);
    try {
      await this.program.parseAsync([...argv], { from: 'user' });
      return this.exitCode;
    } catch (error) {
      if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
      const failure = describeFailure(error);
      if (this.json) this.printJsonFailure(failure);
      else {
        const line = `${this.program.name()}: ${failure.line}`;
        process.stderr.write(`${this.redactor.redact(line)}\n`);
      }
      return failure.exitCode;
    }
  }
}
