import { ServiceError } from '@svc/contracts';

export type SecretFieldMode = 'as-sent' | 'no-shapes';

/**
 * True when the JSON text opens more than `max` arrays or objects at once. A scan of the raw
 * text (strings skipped), so a 10,000-level document is refused before any parser or walk
 * could recurse into it.
 */
export function nestsDeeper(text: string, max: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // Skip the string: to the next quote that is not escaped.
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c) i++;
        else if (d === 0x22) break;
      }
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    }
  }
  return false;
}

export interface CleanOptions {
  /** Registered secrets and credential shapes replaced. */
  scrub: (text: string) => string;
  /** Registered secrets replaced, shapes kept. */
  mask: (text: string) => string;
  /** Keep U+0000 in strings (the domain replaces it) instead of refusing the body. */
  keepNul: boolean;
  secretFields: Readonly<Record<string, SecretFieldMode>>;
}

type Container = Record<string, unknown> | unknown[];
interface Pending {
  value: unknown;
  /** Where the value sits, for an error message: computed only when one is needed. */
  parent: Pending | null;
  label: string | number;
  /** How strings below this point are treated. */
  mode: SecretFieldMode | 'scrub';
  into: Container;
  /** Dotted object-key path from the body (`runnerJob.transientEnv`); null below an array. */
  field: string | null;
}

function pathOf(node: Pending): string {
  const parts: string[] = [];
  // The root (no parent) is the body itself.
  for (let at: Pending = node; at.parent; at = at.parent)
    parts.push(typeof at.label === 'number' ? `[${at.label}]` : `.${at.label}`);
  return `body${parts.reverse().join('')}`;
}

/**
 * A copy of a parsed body that is safe to validate and store: strings well-formed and scrubbed,
 * `__proto__` keys dropped, U+0000 refused (or kept when asked). Iterative, so its cost is one
 * visit per value whatever the shape; keys keep their order.
 */
export function cleanBody(root: unknown, options: CleanOptions): unknown {
  const holder: unknown[] = [undefined];
  const stack: Pending[] = [
    { value: root, parent: null, label: 0, mode: 'scrub', into: holder, field: '' },
  ];
  const text = (s: string, node: Pending, key: boolean): string => {
    if (!options.keepNul && s.includes('\u0000'))
      throw new ServiceError(
        'schema-invalid',
        `U+0000 is not allowed in requests (at ${pathOf(node)}${key ? '.<key>' : ''})`,
      );
    const formed = s.isWellFormed() ? s : s.toWellFormed();
    if (node.mode === 'as-sent') return formed;
    return node.mode === 'no-shapes' ? options.mask(formed) : options.scrub(formed);
  };
  while (stack.length > 0) {
    const node = stack.pop()!;
    const { value, mode, into } = node;
    let out: unknown = value;
    if (typeof value === 'string') {
      out = text(value, node, false);
    } else if (Array.isArray(value)) {
      const list: unknown[] = new Array<unknown>(value.length);
      for (let i = 0; i < value.length; i++)
        stack.push({ value: value[i], parent: node, label: i, mode, into: list, field: null });
      out = list;
    } else if (value !== null && typeof value === 'object') {
      const object: Record<string, unknown> = {};
      for (const [rawKey, child] of Object.entries(value)) {
        if (rawKey === '__proto__') continue;
        const name = text(rawKey, node, true);
        // A scrubbed key cannot become `__proto__`, but the plain assignment below relies on it.
        if (name === '__proto__') continue;
        // A key holding a dot cannot spell a declared path (`{"runnerJob.transientEnv": …}`).
        const field =
          node.field === null || rawKey.includes('.')
            ? null
            : node.field === ''
              ? rawKey
              : `${node.field}.${rawKey}`;
        const declared =
          field !== null && Object.hasOwn(options.secretFields, field)
            ? options.secretFields[field]
            : undefined;
        const childMode = declared ?? mode;
        // Own data property in document order (`__proto__` is the only key an assignment
        // would not create); filled in when the child is visited.
        object[name] = undefined;
        stack.push({
          value: child,
          parent: node,
          label: name,
          mode: childMode,
          into: object,
          field,
        });
      }
      out = object;
    }
    (into as Record<string | number, unknown>)[node.label] = out;
  }
  return holder[0];
}
