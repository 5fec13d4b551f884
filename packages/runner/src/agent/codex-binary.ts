import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { AgentError } from './errors.js';

/**
 * Where the native agent binary lives. The `@openai/codex` npm package ships a Node wrapper
 * whose per-platform optional dependency holds the binary; spawning the binary directly
 * saves the wrapper's start-up (about 80 ms) and keeps signals aimed at the real process.
 */

const TARGETS: Record<string, { pkg: string; triple: string } | undefined> = {
  'linux-x64': { pkg: '@openai/codex-linux-x64', triple: 'x86_64-unknown-linux-musl' },
  'linux-arm64': { pkg: '@openai/codex-linux-arm64', triple: 'aarch64-unknown-linux-musl' },
  'darwin-x64': { pkg: '@openai/codex-darwin-x64', triple: 'x86_64-apple-darwin' },
  'darwin-arm64': { pkg: '@openai/codex-darwin-arm64', triple: 'aarch64-apple-darwin' },
};

/**
 * Resolve the binary: `override` wins; otherwise the platform package of the installed
 * `@openai/codex`.
 */
export function resolveCodexBinary(override?: string): string {
  if (override) {
    if (!existsSync(override))
      throw new AgentError('spawn-failed', `agent binary not found: ${override}`);
    return override;
  }
  const target = TARGETS[`${process.platform}-${process.arch}`];
  if (!target) {
    throw new AgentError('spawn-failed', `no agent binary for ${process.platform}-${process.arch}`);
  }
  let vendor: string;
  try {
    // Resolve from the wrapper package, so the platform package it depends on is found even
    // when npm did not hoist it next to this package.
    const wrapper = createRequire(import.meta.url).resolve('@openai/codex/package.json');
    const platformPkg = createRequire(wrapper).resolve(`${target.pkg}/package.json`);
    vendor = join(dirname(platformPkg), 'vendor', target.triple);
  } catch (error) {
    throw new AgentError('spawn-failed', `agent package ${target.pkg} is not installed`, {
      cause: error,
    });
  }
  const path = join(vendor, 'bin', 'codex');
  if (!existsSync(path)) throw new AgentError('spawn-failed', `agent binary missing at ${path}`);
  return path;
}
