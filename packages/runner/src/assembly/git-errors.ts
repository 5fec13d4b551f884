import { ServiceError } from '@svc/contracts';
import { GitCommandError } from './git-exec.js';
import type { FetchTarget } from './mirror.js';

/**
 * Map a failed git command to a failure kind. Git's messages are forced to English (LC_ALL=C) so
 * the patterns hold; the stderr quoted in the message is already redacted and bounded.
 */
const AUTH =
  /Authentication failed|could not read (Username|Password)|terminal prompts disabled|HTTP (401|403)|requested URL returned error: (401|403)|Permission denied \(publickey|Host key verification failed/i;
const NOT_FOUND =
  /does not appear to be a git repository|Repository not found|requested URL returned error: 404|HTTP 404|not found: did you run git update-server-info|couldn't find remote ref/i;

export function classifyGitFailure(
  error: unknown,
  operation: string,
  target: FetchTarget,
  credentialProvided: boolean,
): ServiceError {
  if (error instanceof ServiceError) return error;
  const where = target.fetchRepoUrl;
  const base = { repoUrl: target.repoUrl, fetchRepoUrl: where, operation };
  if (!(error instanceof GitCommandError)) {
    return new ServiceError('infra-failed', `git ${operation} of ${where} failed`, base);
  }
  if (error.timedOut) {
    return new ServiceError('infra-failed', `git ${operation} of ${where} timed out`, {
      ...base,
      reason: 'timeout',
    });
  }
  const stderr = error.stderr.slice(0, 600);
  if (AUTH.test(error.stderr)) {
    return new ServiceError(
      'secret-unavailable',
      credentialProvided
        ? `git ${operation} of ${where} was refused with the resource credential: ${stderr}`
        : `git ${operation} of ${where} needs a credential (resourceBundleRef.credentialRef): ${stderr}`,
      {
        ...base,
        reason: credentialProvided ? 'authentication-failed' : 'authentication-required',
        credentialProvided,
        valuesPrinted: false,
      },
    );
  }
  if (NOT_FOUND.test(error.stderr)) {
    return new ServiceError('schema-invalid', `git ${operation} of ${where}: ${stderr}`, {
      ...base,
      reason: 'not-found',
    });
  }
  return new ServiceError('infra-failed', `git ${operation} of ${where} failed: ${stderr}`, {
    ...base,
    exitCode: error.exitCode,
  });
}
