import { sha256Hex } from '@svc/contracts';
import type { OperationParams } from './params.js';
import type { RepoRef } from './repos.js';

/**
 * Planned (dry-run) mutations: the exact request the broker would send, which it never sends in
 * p0. Markdown bodies are summarized by length and SHA-256, so the plan can be compared with
 * the text the caller holds without the broker storing or echoing it.
 */
export interface PlannedRequest {
  dryRun: true;
  writesRemote: false;
  sent: false;
  method: 'POST';
  path: string;
  params: Record<string, string | number | boolean>;
  body: BodyDigest | null;
  credentialRef: string;
}

export interface BodyDigest {
  length: number;
  sha256: string;
}

type MutationParams = Extract<
  OperationParams,
  { operation: 'codehost.pr.create' } | { operation: 'codehost.pr.comment.create' }
>;

export function digest(text: string): BodyDigest {
  return { length: Buffer.byteLength(text, 'utf8'), sha256: sha256Hex(text) };
}

export function planMutation(
  repo: RepoRef,
  params: MutationParams,
  credentialRef: string,
): PlannedRequest {
  const prefix = `/repos/${encodeURIComponent(repo.owner)}/${encodeURIComponent(repo.name)}`;
  if (params.operation === 'codehost.pr.create') {
    return {
      dryRun: true,
      writesRemote: false,
      sent: false,
      method: 'POST',
      path: `${prefix}/pulls`,
      params: {
        title: params.title,
        base: params.base,
        head: params.head,
        draft: params.draft,
        maintainer_can_modify: params.maintainerCanModify,
      },
      body: params.body === null ? null : digest(params.body),
      credentialRef,
    };
  }
  return {
    dryRun: true,
    writesRemote: false,
    sent: false,
    method: 'POST',
    path: `${prefix}/issues/${params.number}/comments`,
    params: { issue_number: params.number },
    body: digest(params.body),
    credentialRef,
  };
}
