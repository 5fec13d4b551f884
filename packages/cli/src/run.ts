import { Command, CommanderError } from 'commander';
import { ApiClient, Redactor } from '@svc/contracts';
import { loadCliConfig, type CliConfig, type GlobalFlags } from './config.js';
import { describeFailure, EXIT } from './errors.js';
import { Output } from './output.js';

/** What one command invocation works with, built from the global flags and the environment. */
export interface Invocation {
  config: CliConfig;
  client: ApiClient;
  out: Output;
}

export type Action<A extends unknown[]> = (inv: Invocation, ...args: A) => Promise<void>;

/**
 * The program skeleton shared by `queue` and `sessions`: global flags, one redactor for every
 * printed line (it learns the token before anything is sent), usage errors as exit 2.
 */
export class Cli {
  readonly redactor = new Redactor();
  readonly program: Command;

  constructor(name: string, description: string) {
    this.program = new Command(name)
      .description(description)
      .option('--url <url>', 'manager URL (default SVC_MANAGER_URL, else http://127.0.0.1:8080)')
      .option('--token <token>', 'API key (default SVC_API_KEY)')
      .option('--json', 'print JSON (the default when standard output is not a terminal)')
      .exitOverride()
      .configureOutput({
        writeErr: (text) => process.stderr.write(this.redactor.redact(text)),
        // Usage errors are one line like every other failure, naming their kind.
        outputError: (text, write) =>
          write(`${name}: usage: ${text.replace(/^error: /, '').trim()} (see ${name} --help)\n`),
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
      const out = new Output(this.redactor, config.json);
      await fn({ config, client, out }, ...(args.slice(0, -1) as A));
    };
  }

  /** Parse and run; the exit code says how it went (packages/cli/README.md). */
  async run(argv: readonly string[]): Promise<number> {
    if (argv.length === 0) {
      this.program.outputHelp({ error: true });
      return EXIT.usage;
    }
    try {
      await this.program.parseAsync([...argv], { from: 'user' });
      return EXIT.ok;
    } catch (error) {
      if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
      const failure = describeFailure(error);
      process.stderr.write(`${this.redactor.redact(`${this.program.name()}: ${failure.line}`)}\n`);
      return failure.exitCode;
    }
  }
}
