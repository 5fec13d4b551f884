import { lstat, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ServiceError, sha256Hex } from '@svc/contracts';
import { assertRealInside, infra, isMissing } from './paths.js';
import { walkTree } from './walk.js';

/**
 * Skills come only from `.agents/skills/<name>/SKILL.md` in the workspace (spec/3, "Prompt and
 * skill assembly"). Facts are bounded: a summary of at most 200 characters, never the body.
 */
export const SKILLS_DIR = '.agents/skills';
export const SKILL_MANIFEST = 'SKILL.md';
const SUMMARY_MAX = 200;
const MAX_SKILLS = 128;
const MAX_SKILL_FILES = 5_000;

export interface SkillFact {
  /** The directory name; the name `requiredSkills` refers to. */
  name: string;
  /** `name` from the manifest front matter when it differs from the directory name. */
  declaredName?: string;
  manifestPath: string;
  sha256: string;
  bytes: number;
  summary: string;
  fileCount: number;
  /** The bundle that put the skill there (`name` or `bundles[i]`), or `checkout`. */
  sourceBundle: string;
}

export interface SkillsSummary {
  dir: string;
  present: boolean;
  skills: SkillFact[];
  truncated: boolean;
}

export interface RequiredSkillsSummary {
  required: string[];
  found: Array<{ name: string; sha256: string; bytes: number }>;
}

export interface DiscoverSkillsOptions {
  /** Real path of the workspace. */
  workspaceRoot: string;
  /** Which bundle a workspace-relative skill directory came from. */
  sourceOf?: (skillDir: string) => string;
}

export async function discoverSkills(options: DiscoverSkillsOptions): Promise<SkillsSummary> {
  const root = join(options.workspaceRoot, ...SKILLS_DIR.split('/'));
  const summary: SkillsSummary = { dir: SKILLS_DIR, present: false, skills: [], truncated: false };
  let names: string[];
  try {
    await assertRealInside(options.workspaceRoot, root, 'skills', SKILLS_DIR);
    names = (await readdir(root)).sort();
  } catch (error) {
    if (error instanceof ServiceError) throw error;
    if (isMissing(error)) return summary;
    throw infra(`cannot read ${SKILLS_DIR}`, error);
  }
  summary.present = true;
  for (const name of names) {
    if (name.startsWith('.')) continue;
    const skillDir = `${SKILLS_DIR}/${name}`;
    const manifest = join(root, name, SKILL_MANIFEST);
    const manifestShown = `${skillDir}/${SKILL_MANIFEST}`;
    const dirReal = await assertRealInside(
      options.workspaceRoot,
      join(root, name),
      'skills',
      skillDir,
    );
    if (!(await lstat(dirReal)).isDirectory()) continue;
    const real = await assertRealInside(options.workspaceRoot, manifest, 'skills', manifestShown);
    const info = await lstat(real).catch(() => undefined);
    if (!info?.isFile()) continue;
    if (summary.skills.length >= MAX_SKILLS) {
      summary.truncated = true;
      break;
    }
    const content = await readFile(real);
    const tree = await walkTree(dirReal, {
      realRoot: options.workspaceRoot,
      field: 'skills',
      shown: skillDir,
      maxFiles: MAX_SKILL_FILES,
      maxBytes: Number.MAX_SAFE_INTEGER,
    });
    const meta = frontMatter(content.toString('utf8'));
    const fact: SkillFact = {
      name,
      manifestPath: manifestShown,
      sha256: sha256Hex(content),
      bytes: content.length,
      summary: bound(meta.description ?? firstParagraphLine(meta.body)),
      fileCount: tree.files,
      sourceBundle: options.sourceOf?.(skillDir) ?? 'checkout',
    };
    if (meta.name && meta.name !== name) fact.declaredName = bound(meta.name, 128);
    summary.skills.push(fact);
  }
  return summary;
}

/**
 * Every required skill must have its manifest; otherwise the run is blocked with
 * `required-skill-unavailable` and details naming required, missing and available skills.
 */
export function checkRequiredSkills(
  required: ReadonlyArray<{ name: string }>,
  skills: SkillsSummary,
): RequiredSkillsSummary {
  const names = required.map((r) => r.name);
  const byName = new Map(skills.skills.map((s) => [s.name, s]));
  const missing = names.filter((n) => !byName.has(n));
  if (missing.length > 0) {
    throw new ServiceError(
      'required-skill-unavailable',
      `required skill${missing.length > 1 ? 's' : ''} ${missing.join(', ')} not found in ${SKILLS_DIR}/<name>/${SKILL_MANIFEST}`,
      { required: names, missing, available: skills.skills.map((s) => s.name) },
    );
  }
  return {
    required: names,
    found: names.map((n) => {
      const skill = byName.get(n);
      return { name: n, sha256: skill?.sha256 ?? '', bytes: skill?.bytes ?? 0 };
    }),
  };
}

interface FrontMatter {
  name?: string;
  description?: string;
  body: string;
}

/** A YAML-ish `---` block: `key: value` lines, quoted values, and `>`/`|` folded blocks. */
export function frontMatter(text: string): FrontMatter {
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  if (lines[0]?.trim() !== '---') return { body: text };
  const end = lines.findIndex((line, i) => i > 0 && /^(---|\.\.\.)\s*$/.test(line));
  if (end < 0) return { body: text };
  const out: FrontMatter = { body: lines.slice(end + 1).join('\n') };
  for (let i = 1; i < end; i++) {
    const match = /^([A-Za-z_][\w-]*):\s*(.*)$/.exec(lines[i] ?? '');
    if (!match) continue;
    const key = match[1];
    let value = (match[2] ?? '').trim();
    if (/^[>|][-+]?$/.test(value)) {
      const block: string[] = [];
      while (i + 1 < end && /^\s+\S|^\s*$/.test(lines[i + 1] ?? ''))
        block.push((lines[++i] ?? '').trim());
      value = block.filter(Boolean).join(' ');
    }
    value = value.replace(/^(['"])(.*)\1$/, '$2');
    if (key === 'name') out.name = value;
    if (key === 'description') out.description = value;
  }
  return out;
}

function firstParagraphLine(body: string): string {
  for (const line of body.split(/\r?\n/)) {
    const trimmed = line.trim();
    if (trimmed && !trimmed.startsWith('#')) return trimmed;
  }
  return '';
}

function bound(text: string, max = SUMMARY_MAX): string {
  const printable = [...text].map((c) => (c.charCodeAt(0) < 0x20 || c === '\u007f' ? ' ' : c));
  const clean = printable.join('').replace(/\s+/g, ' ').trim();
  return clean.length > max ? `${clean.slice(0, max - 1)}…` : clean;
}
