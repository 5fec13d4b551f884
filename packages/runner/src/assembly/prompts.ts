import { lstat, readFile } from 'node:fs/promises';
import { ServiceError, sha256Hex, type PromptRef } from '@svc/contracts';
import { assertRealInside, infra, isMissing, resolveInside } from './paths.js';

/**
 * Domain prompts (`promptRefs`) from the materialized checkout. Caps are enforced on the bytes as
 * stored: exceeding one is `prompt-too-large`, never a silent truncation. A missing required
 * prompt is `prompt-unavailable`; a missing optional one is reported as skipped.
 */
export interface PromptCaps {
  perPromptBytes: number;
  totalBytes: number;
}

export const DEFAULT_PROMPT_CAPS: PromptCaps = {
  perPromptBytes: 64 * 1024,
  totalBytes: 256 * 1024,
};

/** What events and results carry about a prompt: never its text. */
export interface PromptFact {
  name: string;
  path: string;
  sha256: string | null;
  bytes: number | null;
  inject: 'thread-start';
  required: boolean;
  /** True only in the facts of a turn whose first message carried the prompt. */
  injected: boolean;
  status: 'loaded' | 'skipped';
  skipReason?: 'missing';
}

/** A loaded prompt, for composing the first turn of a new thread. */
export interface LoadedPrompt {
  name: string;
  path: string;
  text: string;
  sha256: string;
  bytes: number;
}

export interface PromptsRead {
  facts: PromptFact[];
  prompts: LoadedPrompt[];
  totalBytes: number;
}

export async function readPrompts(
  checkoutRoot: string,
  refs: readonly PromptRef[],
  caps: PromptCaps = DEFAULT_PROMPT_CAPS,
): Promise<PromptsRead> {
  const facts: PromptFact[] = [];
  const prompts: LoadedPrompt[] = [];
  const seen = new Set<string>();
  let totalBytes = 0;
  for (const [i, ref] of refs.entries()) {
    const field = `resourceBundleRef.promptRefs[${i}].path`;
    if (seen.has(ref.name)) {
      throw new ServiceError('schema-invalid', `promptRefs name ${ref.name} appears twice`, {
        field: `resourceBundleRef.promptRefs[${i}].name`,
      });
    }
    seen.add(ref.name);
    const base = { name: ref.name, path: ref.path, inject: ref.inject, required: ref.required };
    const abs = resolveInside(checkoutRoot, ref.path, field);
    const content = await readPromptFile(checkoutRoot, abs, ref, field, caps);
    if (content === null) {
      if (ref.required) {
        throw new ServiceError(
          'prompt-unavailable',
          `required prompt ${ref.name} (${ref.path}) is missing from the checkout`,
          { name: ref.name, path: ref.path },
        );
      }
      facts.push({
        ...base,
        sha256: null,
        bytes: null,
        injected: false,
        status: 'skipped',
        skipReason: 'missing',
      });
      continue;
    }
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(content);
    } catch {
      throw new ServiceError(
        'schema-invalid',
        `prompt ${ref.name} (${ref.path}) is not UTF-8 text`,
        {
          field,
          name: ref.name,
          path: ref.path,
        },
      );
    }
    totalBytes += content.length;
    if (totalBytes > caps.totalBytes) {
      throw new ServiceError(
        'prompt-too-large',
        `assembled prompts exceed ${caps.totalBytes} bytes (at ${ref.name}: ${totalBytes} bytes)`,
        {
          name: ref.name,
          path: ref.path,
          totalBytes,
          capBytes: caps.totalBytes,
          scope: 'assembled',
        },
      );
    }
    const sha256 = sha256Hex(content);
    facts.push({ ...base, sha256, bytes: content.length, injected: false, status: 'loaded' });
    prompts.push({ name: ref.name, path: ref.path, text, sha256, bytes: content.length });
  }
  return { facts, prompts, totalBytes };
}

/** The bytes of a prompt file, or null when it is absent (or not a regular file). */
async function readPromptFile(
  checkoutRoot: string,
  abs: string,
  ref: PromptRef,
  field: string,
  caps: PromptCaps,
): Promise<Buffer | null> {
  try {
    await lstat(abs);
  } catch (error) {
    if (isMissing(error)) return null;
    throw infra(`cannot read prompt ${ref.name}`, error);
  }
  const real = await assertRealInside(checkoutRoot, abs, field, ref.path);
  const info = await lstat(real).catch(() => undefined);
  if (!info?.isFile()) return null;
  const tooLarge = (bytes: number) =>
    new ServiceError(
      'prompt-too-large',
      `prompt ${ref.name} (${ref.path}) is ${bytes} bytes, over the ${caps.perPromptBytes}-byte cap`,
      { name: ref.name, path: ref.path, bytes, capBytes: caps.perPromptBytes, scope: 'single' },
    );
  if (info.size > caps.perPromptBytes) throw tooLarge(info.size);
  const content = await readFile(real);
  // The file may have grown between stat and read.
  if (content.length > caps.perPromptBytes) throw tooLarge(content.length);
  return content;
}
