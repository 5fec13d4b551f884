import { execFileSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { dirname, isAbsolute, join, normalize, relative } from 'node:path';

/**
 * Builds the final stage of a Dockerfile into a directory, without a container engine, so a test
 * can start the image's entrypoint there: every COPY is done (from the build context, filtered by
 * the root .dockerignore, or from an earlier stage), and every RUN that shapes the files is run
 * for real (the production `npm ci --omit=dev`, file pruning, chmod). Three kinds of RUN are
 * not repeated, each for a stated reason:
 * - the build stage's development install and compile (`npm ci` without --omit, `npx tsc -b`,
 *   `npm run build`): their output is the repository's own build (the suite builds first), put
 *   where the stage would have it, and only for packages whose sources the stage copied;
 * - operating system layers (apt-get, user accounts): this machine is the base image here;
 * - `npm cache clean`: it would empty this machine's npm cache, not the image's.
 * Any other command fails the assembly, so a new kind of step is looked at, not skipped.
 */
export interface AssembledImage {
  /** The final stage's root: `/app/...` in the image is `<root>/app/...` here. */
  root: string;
  workdir: string;
  env: Record<string, string>;
  entrypoint: string[];
  user: string | null;
  /** What was done, one line per step (for a failure message). */
  log: string[];
}

interface Instruction {
  keyword: string;
  args: string;
  line: number;
}

interface Stage {
  name: string | undefined;
  root: string;
  workdir: string;
  env: Record<string, string>;
  args: Record<string, string>;
  entrypoint: string[];
  user: string | null;
}

/** Instructions with continuation lines joined and comments dropped. */
export function parseDockerfile(text: string): Instruction[] {
  const out: Instruction[] = [];
  let current: Instruction | null = null;
  text.split('\n').forEach((raw, index) => {
    const line = raw.trim();
    if (line.startsWith('#') || (current === null && line === '')) return;
    const continued = line.endsWith('\\');
    const part = continued ? line.slice(0, -1).trim() : line;
    if (current === null) {
      const [keyword = '', ...rest] = part.split(/\s+/);
      current = { keyword: keyword.toUpperCase(), args: rest.join(' '), line: index + 1 };
    } else current.args += (current.args && part ? ' ' : '') + part;
    if (!continued) {
      out.push(current);
      current = null;
    }
  });
  return out;
}

/** Docker's .dockerignore rules: patterns from the context root, `**`, `!` exceptions. */
export function dockerignore(text: string): (path: string) => boolean {
  const rules = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => {
      const negate = l.startsWith('!');
      const pattern = normalize(negate ? l.slice(1) : l).replace(/^\/+|\/+$/g, '');
      return { negate, regex: globRegex(pattern) };
    });
  return (path: string) => {
    // A path is excluded when it or one of its parent directories matches the last rule seen.
    const parts = path.split('/');
    let excluded = false;
    for (const rule of rules) {
      for (let i = 1; i <= parts.length; i++) {
        if (rule.regex.test(parts.slice(0, i).join('/'))) {
          excluded = !rule.negate;
          break;
        }
      }
    }
    return excluded;
  };
}

function globRegex(pattern: string): RegExp {
  let out = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*' && pattern[i + 1] === '*') {
      const slash = pattern[i + 2] === '/';
      out += slash ? '(?:.*/)?' : '.*';
      i += slash ? 2 : 1;
    } else if (c === '*') out += '[^/]*';
    else if (c === '?') out += '[^/]';
    else out += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${out}$`);
}

export function assembleImage(options: {
  repo: string;
  dockerfile: string;
  out: string;
}): AssembledImage {
  const { repo, out } = options;
  const ignored = dockerignore(readFileSync(join(repo, '.dockerignore'), 'utf8'));
  const instructions = parseDockerfile(readFileSync(join(repo, options.dockerfile), 'utf8'));
  const globalArgs: Record<string, string> = {};
  const stages: Stage[] = [];
  const log: string[] = [];
  let stage: Stage | undefined;
  const fail = (ins: Instruction, message: string): never => {
    throw new Error(`${options.dockerfile}:${ins.line} ${ins.keyword} ${ins.args}: ${message}`);
  };
  const expand = (value: string, vars: Record<string, string>) =>
    value.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a: string, b: string) => vars[a ?? b] ?? '');
  /** A path in the stage's file system: absolute, or relative to its WORKDIR. */
  const inStage = (s: Stage, path: string) =>
    join(s.root, isAbsolute(path) ? path : join(s.workdir, path));

  for (const ins of instructions) {
    if (ins.keyword === 'ARG') {
      const [name = '', value = ''] = ins.args.split('=');
      if (stage) stage.args[name] = globalArgs[name] ?? value;
      else globalArgs[name] = value;
      continue;
    }
    if (ins.keyword === 'FROM') {
      const match = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(ins.args) ?? fail(ins, 'unreadable FROM');
      const base = stages.find((s) => s.name === match[1]);
      if (base) fail(ins, 'a stage based on another stage is not supported here');
      const root = join(out, `stage-${stages.length}`);
      mkdirSync(root, { recursive: true });
      // The base image's environment, as far as a started program sees it: a search path.
      stage = {
        name: match[2],
        root,
        workdir: '/',
        env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' },
        args: {},
        entrypoint: [],
        user: null,
      };
      stages.push(stage);
      continue;
    }
    if (!stage) fail(ins, 'instruction before FROM');
    const s = stage!;
    const vars = { ...s.env, ...s.args };
    switch (ins.keyword) {
      case 'WORKDIR':
        s.workdir = expand(ins.args, vars);
        mkdirSync(join(s.root, s.workdir), { recursive: true });
        break;
      case 'ENV':
        for (const [, name, quoted, bare] of ins.args.matchAll(/(\w+)=(?:"([^"]*)"|(\S*))/g))
          s.env[name!] = expand(quoted ?? bare ?? '', { ...s.env, ...s.args });
        break;
      case 'USER':
        s.user = ins.args;
        break;
      case 'ENTRYPOINT':
        s.entrypoint = JSON.parse(ins.args) as string[];
        break;
      case 'COPY':
        copy(ins, s);
        break;
      case 'RUN':
        run(ins, s);
        break;
      case 'LABEL':
      case 'EXPOSE':
      case 'HEALTHCHECK':
        break;
      default:
        fail(ins, 'instruction not supported by this assembly');
    }
  }

  function copy(ins: Instruction, s: Stage): void {
    const tokens = ins.args.split(/\s+/);
    const flags = tokens.filter((t) => t.startsWith('--'));
    const paths = tokens.filter((t) => !t.startsWith('--'));
    const dest = paths.pop() ?? fail(ins, 'no destination');
    const from = flags.find((f) => f.startsWith('--from='))?.slice('--from='.length);
    const source = from === undefined ? undefined : stages.find((x) => x.name === from);
    if (from !== undefined && !source) fail(ins, `no stage ${from}`);
    const intoDir = dest.endsWith('/') || paths.length > 1;
    for (const path of paths) {
      if (/[*?[]/.test(path)) fail(ins, 'wildcards are not supported by this assembly');
      const target = intoDir ? join(inStage(s, dest), path.split('/').at(-1)!) : inStage(s, dest);
      mkdirSync(dirname(target), { recursive: true });
      if (source) {
        const src = inStage(source, path);
        if (!existsSync(src)) fail(ins, `${path} does not exist in stage ${from}`);
        // Hard links: the stages are this test's own copies, and node_modules is large. A
        // directory's contents go into the destination, as COPY does.
        if (lstatSync(src).isDirectory()) {
          mkdirSync(target, { recursive: true });
          execFileSync('cp', ['-al', '--', `${src}/.`, target]);
        } else execFileSync('cp', ['-al', '--', src, target]);
      } else {
        const rel = normalize(path).replace(/^\.\/?/, '');
        if (rel.startsWith('..')) fail(ins, 'outside the build context');
        if (rel !== '' && ignored(rel)) fail(ins, `${path} is excluded by .dockerignore`);
        const src = join(repo, rel);
        if (!existsSync(src)) fail(ins, `${path} is not in the build context`);
        cpSync(src, target, {
          recursive: true,
          verbatimSymlinks: true,
          filter: (p) => {
            const r = relative(repo, p);
            return r === '' || !ignored(r);
          },
        });
      }
      log.push(`COPY ${from ? `--from=${from} ` : ''}${path} -> ${dest}`);
    }
  }

  function run(ins: Instruction, s: Stage): void {
    const steps = ins.args.split('&&').map((p) => p.trim());
    const first = steps[0] ?? '';
    if (/^(apt-get|userdel|groupadd|useradd)\b/.test(first)) {
      log.push(`RUN (operating system layer, not repeated): ${first.slice(0, 60)}`);
      return;
    }
    const cwd = join(s.root, s.workdir);
    for (const step of steps) {
      if (/^npm ci\b/.test(step) && step.includes('--omit=dev')) {
        execFileSync('sh', ['-c', step], {
          cwd,
          stdio: ['ignore', 'pipe', 'pipe'],
          env: {
            ...process.env,
            npm_config_prefer_offline: 'true',
            npm_config_update_notifier: 'false',
          },
        });
        log.push(`RUN ${step}`);
      } else if (/^npm ci\b/.test(step)) {
        symlinkSync(join(repo, 'node_modules'), join(cwd, 'node_modules'));
        log.push(`RUN ${step} (the repository's development install)`);
      } else if (/^npx tsc -b \S+$/.test(step)) {
        for (const dir of projectClosure(repo, step.split(' ').at(-1)!))
          takeBuild(ins, cwd, dir, 'dist');
        log.push(`RUN ${step} (the repository's build)`);
      } else if (/^npm run build --workspace \S+$/.test(step)) {
        takeBuild(ins, cwd, workspaceDir(repo, step.split(' ').at(-1)!), 'dist');
        log.push(`RUN ${step} (the repository's build)`);
      } else if (/^npm cache clean\b/.test(step)) {
        log.push(`RUN ${step} (not repeated: it would clean this machine's cache)`);
      } else if (/^(find|chmod|rm) /.test(step)) {
        execFileSync('sh', ['-c', step], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
        log.push(`RUN ${step}`);
      } else fail(ins, `a step this assembly does not know: ${step}`);
    }
  }

  /** The repository's build output of one package, where the stage's own build would put it. */
  function takeBuild(ins: Instruction, cwd: string, dir: string, output: string): void {
    if (!existsSync(join(cwd, dir, 'package.json')) || !existsSync(join(cwd, dir, 'src')))
      fail(ins, `the stage builds ${dir} but did not copy its sources`);
    const built = join(repo, dir, output);
    if (!existsSync(built)) fail(ins, `${dir}/${output} is not built: run npm run build first`);
    cpSync(built, join(cwd, dir, output), { recursive: true });
  }

  const final = stages.at(-1);
  if (!final) throw new Error(`${options.dockerfile}: no stage`);
  return {
    root: final.root,
    workdir: final.workdir,
    env: final.env,
    entrypoint: final.entrypoint,
    user: final.user,
    log,
  };
}

/** The package directories a `tsc -b` of one project compiles (its references, transitively). */
function projectClosure(repo: string, config: string): string[] {
  const seen = new Set<string>();
  const visit = (file: string) => {
    const dir = relative(repo, dirname(join(repo, file)));
    if (seen.has(dir)) return;
    seen.add(dir);
    const parsed = JSON.parse(readFileSync(join(repo, file), 'utf8')) as {
      references?: Array<{ path: string }>;
    };
    for (const ref of parsed.references ?? []) {
      const target = join(dir, ref.path);
      visit(target.endsWith('.json') ? target : join(target, 'tsconfig.json'));
    }
  };
  visit(config);
  return [...seen];
}

function workspaceDir(repo: string, name: string): string {
  for (const entry of readdirSync(join(repo, 'packages'))) {
    const manifest = join(repo, 'packages', entry, 'package.json');
    if (!existsSync(manifest)) continue;
    if ((JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === name)
      return join('packages', entry);
  }
  throw new Error(`no workspace ${name}`);
}

/** Every file under `dir` (symbolic links not followed), relative to it. */
export function listFiles(dir: string): string[] {
  const found: string[] = [];
  const walk = (at: string) => {
    for (const entry of readdirSync(at)) {
      const path = join(at, entry);
      const info = lstatSync(path);
      if (info.isDirectory()) walk(path);
      else found.push(relative(dir, path));
    }
  };
  walk(dir);
  return found;
}

/** Bytes under `dir`, symbolic links not followed. */
export function treeSize(dir: string): number {
  return listFiles(dir).reduce((sum, f) => sum + lstatSync(join(dir, f)).size, 0);
}

export const isFile = (path: string) => existsSync(path) && statSync(path).isFile();
