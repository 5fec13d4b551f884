import { REDACTED as R } from './secret-forms.js';

/**
 * Credentials nobody registered, recognised by shape. The token shapes follow the published
 * formats of each issuer (the same prefixes gitleaks and secretlint's recommended preset use),
 * with generous minimum lengths so a shortened test token is still caught. Each rule keeps the
 * part of the match that says what was there (a scheme, a header name) and replaces the value.
 */
interface ShapeRule {
  name: string;
  /** A cheap test that must pass before the rule's own pattern is run over the text. */
  hint: RegExp;
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
    hint: /PRIVATE KEY/,
    pattern:
      /-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----|$)/g,
    replace: whole,
  },
  {
    name: 'url-userinfo',
    hint: /:\/\/[^\s/?#@]*@/,
    pattern: /\b([a-z][a-z0-9+.-]{1,30}:\/\/)(?!\[redacted\]@)([^\s/?#@"'<>`\\]{1,512})@/gi,
    replace: (m, scheme: string, userinfo: string) =>
      !userinfo.includes(':') && PLAIN_USER.test(userinfo) ? m : `${scheme}${R}@`,
  },
  {
    name: 'authorization-header',
    hint: /authorization/i,
    pattern:
      /\b((?:proxy-)?authorization["']?\s*[:=]\s*["']?(?:(?:bearer|basic|token|digest|bot|apikey)\s+)?)(?!\[redacted\]|(?:bearer|basic|token|digest|bot|apikey)\s+\[redacted\])[^\s"',;]{1,4096}/gi,
    replace: keepFirst,
  },
  {
    name: 'bearer-token',
    hint: /bearer/i,
    pattern: /\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,4096}/gi,
    replace: keepFirst,
  },
  {
    name: 'jwt',
    hint: /eyJ/,
    pattern: /\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g,
    replace: whole,
  },
  {
    name: 'github-token',
    hint: /gh[pousr]_/,
    pattern: /\bgh[pousr]_[A-Za-z0-9]{20,255}\b/g,
    replace: whole,
  },
  {
    name: 'github-fine-grained',
    hint: /github_pat_/,
    pattern: /\bgithub_pat_[A-Za-z0-9_]{20,255}\b/g,
    replace: whole,
  },
  { name: 'gitlab-token', hint: /glpat-/, pattern: /\bglpat-[A-Za-z0-9_-]{20,}/g, replace: whole },
  {
    name: 'anthropic-key',
    hint: /sk-ant-/,
    pattern: /\bsk-ant-[A-Za-z0-9_-]{16,}/g,
    replace: whole,
  },
  { name: 'openai-key', hint: /sk-/, pattern: /\bsk-[A-Za-z0-9_-]{20,}/g, replace: whole },
  {
    name: 'stripe-key',
    hint: /[rs]k_(?:live|test)_/,
    pattern: /\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}/g,
    replace: whole,
  },
  {
    name: 'aws-access-key-id',
    hint: /A(?:KIA|SIA|BIA|CCA|3T)/,
    pattern: /\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b/g,
    replace: whole,
  },
  {
    name: 'aws-secret-access-key',
    hint: /aws_secret_access_key/i,
    pattern: /\b(aws_secret_access_key["']?\s*[:=]\s*["']?)[A-Za-z0-9/+=]{40}\b/gi,
    replace: keepFirst,
  },
  {
    name: 'slack-token',
    hint: /xox[abposre]-/,
    pattern: /\bxox[abposre]-[A-Za-z0-9-]{10,}/g,
    replace: whole,
  },
  {
    name: 'slack-app-token',
    hint: /xapp-/,
    pattern: /\bxapp-[0-9]+-[A-Za-z0-9-]{10,}/g,
    replace: whole,
  },
  { name: 'google-api-key', hint: /AIza/, pattern: /\bAIza[0-9A-Za-z_-]{30,}/g, replace: whole },
  { name: 'npm-token', hint: /npm_/, pattern: /\bnpm_[A-Za-z0-9]{30,}/g, replace: whole },
  { name: 'huggingface-token', hint: /hf_/, pattern: /\bhf_[A-Za-z0-9]{30,}/g, replace: whole },
  {
    name: 'runner-job-token',
    hint: /svcr_/,
    pattern: /\bsvcr_[A-Za-z0-9_-]{20,}/g,
    replace: whole,
  },
  {
    name: 'url-credential-parameter',
    hint: /(?:token|key|secret|passw|sig|credential)[a-z-]*=/i,
    pattern:
      /([?&](?:access_token|refresh_token|id_token|token|api_key|apikey|key|secret|client_secret|password|passwd|sig|signature|x-amz-signature|x-amz-credential)=)(?!\[redacted\])[^\s&#"'<>]{4,}/gi,
    replace: keepFirst,
  },
  {
    // An environment assignment of a credential (`GITHUB_TOKEN=…`, `DB_PASSWORD: …`).
    name: 'credential-assignment',
    hint: /PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|ACCESS_KEY|PRIVATE_KEY/,
    pattern:
      /\b([A-Z0-9_]*(?:PASSWORD|PASSWD|SECRET|TOKEN|API_KEY|APIKEY|ACCESS_KEY|PRIVATE_KEY)(?![A-Z0-9_]*_(?:FILE|PATH|DIR|URL|NAME|REF))[A-Z0-9_]*["']?\s*[=:]\s*["']?)(?!\d+\b|\[redacted\])[^\s"'&,;{}[\]<>]{8,}/g,
    replace: keepFirst,
  },
];

/**
 * Every rule's hint in one case-insensitive alternation: a text it does not match holds no
 * rule's anchor, so none of the rules can match it. One scan instead of one per rule keeps the
 * common case (event text, keys, names without any credential) several times cheaper.
 */
const ANY_HINT = new RegExp(SECRET_SHAPES.map((rule) => `(?:${rule.hint.source})`).join('|'), 'i');

/** Replace every credential-shaped substring of `text` with the redaction mark. */
export function scrubSecretShapes(text: string): string {
  if (!ANY_HINT.test(text)) return text;
  let out = text;
  for (const rule of SECRET_SHAPES) {
    // Most texts hold none of a rule's anchors: the hint skips the rule's costlier pattern.
    if (!rule.hint.test(out)) continue;
    rule.pattern.lastIndex = 0;
    out = out.replace(rule.pattern, rule.replace as (m: string, ...a: unknown[]) => string);
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
