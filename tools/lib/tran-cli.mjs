// Command lines of `tran` (every route) and `trans` (the script form). Parsing only: the request
// goes out through platform-ssh.mjs; nothing here runs a local shell.
import { parsePatch, PatchError } from './patch.mjs';
import { printVersion } from './version.mjs';
import {
  EXIT,
  LIMITS,
  PROTOCOL,
  ROUTE_PATH,
  TOKEN_ENV,
  ToolError,
  callRoute,
  emitError,
  emitResult,
  readInput,
  readToken,
  resolveEndpoint,
} from './platform-ssh.mjs';

const TARGETS = {
  host: { required: ['host'], optional: [] },
  'host-workspace': { required: ['host', 'workspace'], optional: [] },
  ssh: { required: [], optional: [] },
  cluster: { required: [], optional: ['cluster'] },
  workload: { required: ['namespace', 'workload'], optional: ['container', 'cluster'] },
};

const COMMON = '[--timeout <seconds>] [--json]';
export const SURFACE = [
  {
    route: 'host',
    operation: 'argv',
    usage: `tran host argv --host <host> ${COMMON} -- <command> [args...]`,
  },
  {
    route: 'host',
    operation: 'script',
    usage: `tran host script --host <host> [--file <script>] [--interpreter sh|bash] ${COMMON}`,
  },
  {
    route: 'host-workspace',
    operation: 'argv',
    usage: `tran host-workspace argv --host <host> --workspace <dir> ${COMMON} -- <command> [args...]`,
  },
  {
    route: 'host-workspace',
    operation: 'script',
    usage: `tran host-workspace script --host <host> --workspace <dir> [--file <script>] ${COMMON}`,
  },
  {
    route: 'ssh',
    operation: 'command',
    usage: `tran ssh <[user@]host> ${COMMON} [--] <command words...>`,
  },
  {
    route: 'host-workspace',
    operation: 'apply-patch',
    usage: `tran host-workspace apply-patch --host <host> --workspace <dir> [--file <patch>] ${COMMON}`,
  },
  {
    route: 'cluster',
    operation: 'cli',
    usage: `tran cluster cli [--cluster <name>] ${COMMON} -- <cluster CLI args...>`,
  },
  {
    route: 'cluster',
    operation: 'script',
    usage: `tran cluster script [--cluster <name>] [--file <script>] ${COMMON}`,
  },
  {
    route: 'workload',
    operation: 'argv',
    usage: `tran workload argv --namespace <ns> --workload <kind/name> [--container <c>] ${COMMON} -- <command> [args...]`,
  },
  {
    route: 'workload',
    operation: 'script',
    usage: `tran workload script --namespace <ns> --workload <kind/name> [--container <c>] [--file <script>] ${COMMON}`,
  },
  {
    route: 'workload',
    operation: 'apply-patch',
    usage: `tran workload apply-patch --namespace <ns> --workload <kind/name> [--container <c>] [--file <patch>] ${COMMON}`,
  },
];

export const UNSUPPORTED = [
  {
    operation: 'upload',
    failureKind: 'unsupported-operation',
    reason: 'file transfer is not part of the SSH route',
  },
  {
    operation: 'download',
    failureKind: 'unsupported-operation',
    reason: 'file transfer is not part of the SSH route',
  },
  {
    route: 'windows',
    failureKind: 'unsupported-operation',
    reason: 'Windows hosts and shells are not supported',
  },
];

const TRANSFER = new Set(['upload', 'download', 'scp', 'cp', 'rsync', 'sftp', 'put', 'get']);
const WINDOWS = new Set(['windows', 'win', 'powershell', 'pwsh', 'cmd']);
const VALUE_OPTIONS = new Set([
  'host',
  'workspace',
  'namespace',
  'workload',
  'container',
  'cluster',
  'file',
  'interpreter',
  'timeout',
  'os',
]);

function protocolInfo() {
  return {
    name: PROTOCOL,
    method: 'POST',
    path: ROUTE_PATH,
    auth: `Authorization: Bearer $${TOKEN_ENV}`,
    endpoint: [
      'PLATFORM_FRONTEND_URL (base URL)',
      'PLATFORM_MAIN_SERVER_HOST (https, port 443 unless PLATFORM_MAIN_SERVER_PORT)',
      'PLATFORM_MAIN_SERVER_IP (http, port 80 unless PLATFORM_MAIN_SERVER_PORT)',
      'PLATFORM_MAIN_SERVER_SCHEME (http or https for the two above)',
    ],
    docs: 'docs/tools.md',
  };
}

export function tranHelp() {
  return {
    tool: 'tran',
    description:
      'platform SSH passthrough client: runs commands on platform hosts, host workspaces, the cluster and workloads through the platform frontend SSH route',
    protocol: protocolInfo(),
    supported: SURFACE,
    unsupported: UNSUPPORTED,
    exitCodes: { remote: 'the remote exit code', ...EXIT },
    valuesPrinted: false,
  };
}

export function transHelp() {
  return {
    tool: 'trans',
    description:
      'script form of tran: sends a script (from --file, a file argument or standard input) to one route',
    protocol: protocolInfo(),
    supported: SURFACE.filter((s) => s.operation === 'script').map((s) => ({
      ...s,
      usage: s.usage
        .replace(`tran ${s.route} script`, `trans ${s.route}`)
        .replace('[--file <script>]', '[--file <script> | <script>]'),
    })),
    unsupported: UNSUPPORTED,
    exitCodes: { remote: 'the remote exit code', ...EXIT },
    valuesPrinted: false,
  };
}

function unsupported(what) {
  return new ToolError(
    'unsupported-operation',
    `${what} is not supported by the platform SSH route`,
    {
      operation: what,
    },
  );
}

/** Options before `--`, positionals, and everything after `--`. */
function parseOptions(args) {
  const options = { json: false };
  const positionals = [];
  let rest = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === '--') {
      rest = args.slice(i + 1);
      break;
    }
    if (!arg.startsWith('--')) {
      positionals.push(arg);
      continue;
    }
    const [rawName, inline] = arg.slice(2).split(/=(.*)/s, 2);
    if (rawName === 'token' || rawName.endsWith('-token')) {
      throw new ToolError(
        'schema-invalid',
        `tokens are never passed on the command line; the route uses ${TOKEN_ENV}`,
      );
    }
    if (rawName === 'windows') throw unsupported('Windows');
    if (rawName === 'json') {
      options.json = true;
      continue;
    }
    if (!VALUE_OPTIONS.has(rawName))
      throw new ToolError('schema-invalid', `unknown option --${rawName}`);
    const value = inline ?? args[++i];
    if (value === undefined || value === '')
      throw new ToolError('schema-invalid', `--${rawName} needs a value`);
    options[rawName] = value;
  }
  if (options.os !== undefined && options.os.toLowerCase() !== 'linux') {
    throw WINDOWS.has(options.os.toLowerCase())
      ? unsupported('Windows')
      : new ToolError('schema-invalid', `--os ${options.os} is not supported (linux only)`);
  }
  if (options.interpreter !== undefined && WINDOWS.has(options.interpreter.toLowerCase())) {
    throw unsupported('Windows');
  }
  return { options, positionals, rest };
}

function timeoutOf(options) {
  if (options.timeout === undefined) return 600;
  const value = Number(options.timeout);
  if (!Number.isInteger(value) || value < 1 || value > 86_400) {
    throw new ToolError('schema-invalid', '--timeout must be whole seconds between 1 and 86400');
  }
  return value;
}

function targetOf(route, options) {
  const target = {};
  for (const name of TARGETS[route].required) {
    if (options[name] === undefined)
      throw new ToolError('schema-invalid', `${route} needs --${name}`);
    target[name] = options[name];
  }
  for (const name of TARGETS[route].optional)
    if (options[name] !== undefined) target[name] = options[name];
  return target;
}

async function buildRequest(route, operation, parsed) {
  const { options, positionals, rest } = parsed;
  if (operation === 'command') {
    const [host, ...words] = positionals;
    const command = [...words, ...rest].join(' ');
    if (!host) throw new ToolError('schema-invalid', 'tran ssh needs a host');
    if (!command.trim())
      throw new ToolError(
        'schema-invalid',
        'tran ssh needs a command (interactive sessions are not supported)',
      );
    return { route, operation, target: { host }, command };
  }
  const target = targetOf(route, options);
  if (operation === 'argv' || operation === 'cli') {
    const argv = [...positionals, ...rest];
    if (argv.length === 0)
      throw new ToolError('schema-invalid', `${route} ${operation} needs a command after --`);
    return { route, operation, target, argv };
  }
  const file = options.file ?? positionals[0];
  if (positionals.length > (options.file === undefined ? 1 : 0)) {
    throw new ToolError('schema-invalid', `unexpected argument ${positionals.at(-1)}`);
  }
  if (operation === 'script') {
    const script = await readInput(file, 'script', LIMITS.script);
    const interpreter = options.interpreter ?? 'sh';
    if (!/^[a-z0-9._-]{1,32}$/.test(interpreter))
      throw new ToolError('schema-invalid', '--interpreter must be a program name');
    return { route, operation, target, interpreter, script };
  }
  const patch = await readInput(file, 'patch', LIMITS.patch);
  try {
    parsePatch(patch);
  } catch (error) {
    if (error instanceof PatchError)
      throw new ToolError('schema-invalid', `invalid patch: ${error.message}`);
    throw error;
  }
  return { route, operation, target, patch };
}

/** Endpoint and token first: no input is read for a request that cannot be sent. */
function preflight(env) {
  resolveEndpoint(env);
  readToken(env);
}

async function execute(request, parsed, env, tool) {
  try {
    const result = await callRoute(request, env, timeoutOf(parsed.options));
    return emitResult(result, parsed.options, env);
  } catch (error) {
    return emitError(error, env, tool);
  }
}

export async function runTran(args, env = process.env) {
  try {
    const [route, ...tail] = args;
    if (route === '--version' || route === '-V') return printVersion('tran');
    if (route === undefined || route === '--help' || route === '-h' || route === 'help') {
      process.stdout.write(`${JSON.stringify(tranHelp(), null, 2)}\n`);
      return 0;
    }
    if (TRANSFER.has(route)) throw unsupported(route);
    if (WINDOWS.has(route)) throw unsupported('Windows');
    if (!(route in TARGETS))
      throw new ToolError('schema-invalid', `unknown route ${route}; see tran --help`);
    let operation = 'command';
    let rest = tail;
    if (route !== 'ssh') {
      [operation, ...rest] = tail;
      if (operation !== undefined && TRANSFER.has(operation)) throw unsupported(operation);
      if (!SURFACE.some((s) => s.route === route && s.operation === operation)) {
        throw new ToolError(
          'schema-invalid',
          `route ${route} has no operation ${operation ?? '(none)'}; see tran --help`,
        );
      }
    }
    const parsed = parseOptions(rest);
    preflight(env);
    const request = await buildRequest(route, operation, parsed);
    return await execute(request, parsed, env, 'tran');
  } catch (error) {
    return emitError(error, env, 'tran');
  }
}

export async function runTrans(args, env = process.env) {
  try {
    const [route, ...rest] = args;
    if (route === '--version' || route === '-V') return printVersion('trans');
    if (route === undefined || route === '--help' || route === '-h' || route === 'help') {
      process.stdout.write(`${JSON.stringify(transHelp(), null, 2)}\n`);
      return 0;
    }
    if (TRANSFER.has(route)) throw unsupported(route);
    if (WINDOWS.has(route)) throw unsupported('Windows');
    if (!SURFACE.some((s) => s.route === route && s.operation === 'script')) {
      throw new ToolError('schema-invalid', `trans has no route ${route}; see trans --help`);
    }
    const parsed = parseOptions(rest);
    preflight(env);
    const request = await buildRequest(route, 'script', parsed);
    return await execute(request, parsed, env, 'trans');
  } catch (error) {
    return emitError(error, env, 'trans');
  }
}
