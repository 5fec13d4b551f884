import { REDACTED as R } from './secret-forms.js';

/**
 * Credentials nobody registered, recognised by shape. The token shapes follow the published
 * formats of each issuer (the same prefixes gitleaks and secretlint's recommended preset use),
 * with generous minimum lengths so a shortened test token is still caught. Each rule keeps the
 * part of the match that says what was there (a scheme, a header name) and replaces the value.
 */
interface ShapeRule {
  name: string;
  pattern: RegExp;
  replace: (match: string, ...groups: string[]) => string;
}

const whole = () => R;
const keepFirst = (_m: string, head: string) => `${head}${R}`;

/** Usernames that are addresses, not credentials (`ssh://git@host`). */
const PLAIN_USER = /^[a-z_][a-z0-9_.-]{0,31}$/;

export const SECRET_SHAPES: readonly ShapeRule[] = [
  {
    name: 'private-key-block',
    pattern:
      /-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----|$)/g,
    replace: whole,
  },
  {
    name: 'url-userinfo',
    pattern: /\b([a-z][a-z0-9+.-]{1,30}:\/\/)(?!\[redacted\]@)([^\s/?#@"'<>`\\]{1,512})@/gi,
    replace: (m, scheme: string, userinfo: string) =>
      !userinfo.includes(':') && PLAIN_USER.test(userinfo) ? m : `${scheme}${R}@`,
  },
  {
    name: 'authorization-header',
    pattern:
      /\b((?:proxy-)?authorization["']?\s*[:=]\s*["']?(?:(?:bearer|basic|token|digest|bot|apikey)\s+)?)(?!\[redacted\]|(?:bearer|basic|token|digest|bot|apikey)\s+\[redacted\])[^\s"',;]{1,4096}/gi,
    replace: keepFirst,
  },
  {
    name: 'bearer-token',
    pattern: /\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,4096}/gi,
    replace: keepFirst,
  },
  {
    name: 'jwt',
    pattern: /\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g,
    replace: whole,
  },
  { name: 'github-token', pattern: /\bgh[pousr]_[A-Za-z0-9]{20,255}\b/g, replace: whole },
  { name: 'github-fine-grained', pattern: /\bgithub_pat_[A-Za-z0-9_]{20,255}\b/g, replace: whole },
  { name: 'gitlab-token', pattern: /\bglpat-[A-Za-z0-9_-]{20,}/g, replace: whole },
  { name: 'anthropic-key', pattern: /\bsk-ant-[A-Za-z0-9_-]{16,}/g, replace: whole },
  { name: 'openai-key', pattern: /\bsk-[A-Za-z0-9_-]{20,}/g, replace: whole },
  { name: 'stripe-key', pattern: /\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}/g, replace: whole },
  {
    name: 'aws-access-key-id',
    pattern: /\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b/g,
    replace: whole,
  },
  {
    name: 'aws-secret-access-key',
    pattern: /\b(aws_secret_access_key["']?\s*[:=]\s*["']?)[A-Za-z0-9/+=]{40}\b/gi,
    replace: keepFirst,
  },
  { name: 'slack-token', pattern: /\bxox[abposre]-[A-Za-z0-9-]{10,}/g, replace: whole },
  { name: 'slack-app-token', pattern: /\bxapp-[0-9]+-[A-Za-z0-9-]{10,}/g, replace: whole },
  { name: 'google-api-key', pattern: /\bAIza[0-9A-Za-z_-]{30,}/g, replace: whole },
  { name: 'npm-token', pattern: /\bnpm_[A-Za-z0-9]{30,}/g, replace: whole },
  { name: 'huggingface-token', pattern: /\bhf_[A-Za-z0-9]{30,}/g, replace: whole },
  { name: 'runner-job-token', pattern: /\bsvcr_[A-Za-z0-9_-]{20,}/g, replace: whole },
  {
    name: 'url-credential-parameter',
    pattern:
      /([?&](?:access_token|refresh_token|id_token|token|api_key|apikey|key|secret|client_secret|password|passwd|sig|signature|x-amz-signature|x-amz-credential)=)(?!\[redacted\])[^\s&#"'<>]{4,}/gi,
    replace: keepFirst,
  },
  {
    // An environment assignment of a credential (`GITHUB_TOKEN=…`, `DB_PASSWORD: …`).
    name: 'credential-assignment',
    pattern:
      /\b([A-Z0-9_]*(?:PASSWORD|PASSWD|SECRET|TOKEN|API_KEY|APIKEY|ACCESS_KEY|PRIVATE_KEY)(?![A-Z0-9_]*_(?:FILE|PATH|DIR|URL|NAME|REF))[A-Z0-9_]*["']?\s*[=:]\s*["']?)(?!\d+\b|\[redacted\])[^\s"'&,;{}[\]<>]{8,}/g,
    replace: keepFirst,
  },
];

const ANY_HINT =
  /-----BEGIN|:\/\/|authorization|bearer|eyJ|gh[pousr]_|github_pat_|glpat-|sk-|[rs]k_|A[KS]IA|ABIA|ACCA|A3T|aws_secret|xox|xapp-|AIza|npm_|hf_|svcr_|[?&]|PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|ACCESS_KEY|PRIVATE_KEY/i;

/** Replace every credential-shaped substring of `text` with the redaction mark. */
export function scrubSecretShapes(text: string): string {
  // Most strings hold none of the anchors: one cheap test skips every rule.
  if (!ANY_HINT.test(text)) return text;
  let out = text;
  for (const rule of SECRET_SHAPES) {
    rule.pattern.lastIndex = 0;
    if (rule.pattern.test(out)) {
      rule.pattern.lastIndex = 0;
      out = out.replace(rule.pattern, rule.replace as (m: string, ...a: unknown[]) => string);
    }
  }
  return out;
}

/** The names of the rules that match `text` (for tests and diagnostics). */
export function secretShapesIn(text: string): string[] {
  return SECRET_SHAPES.filter((rule) => {
    rule.pattern.lastIndex = 0;
    return rule.pattern.test(text);
  }).map((r) => r.name);
}
