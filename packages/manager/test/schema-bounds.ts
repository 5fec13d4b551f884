/**
 * Every number a client may send, found in the OpenAPI document (the route schemas): query and
 * path parameters, and every field of a JSON request body, nested objects and arrays included.
 */
export interface NumberField {
  method: string;
  /** OpenAPI path (`/api/v1/runs/{runId}/events`). */
  path: string;
  in: 'query' | 'path' | 'body';
  /** The parameter name, or the body field's path as keys (`[]` for an array item). */
  pointer: string[];
  type: 'integer' | 'number';
  minimum: number | undefined;
  maximum: number | undefined;
}

type Schema = Record<string, any>;

function resolve(doc: any, schema: Schema | undefined): Schema | undefined {
  if (!schema) return schema;
  const ref = schema['$ref'];
  if (typeof ref !== 'string') return schema;
  const name = ref.replace(/^#\/components\/schemas\//, '');
  return resolve(doc, doc.components?.schemas?.[name]);
}

function walk(
  doc: any,
  schema: Schema | undefined,
  at: string[],
  seen: Set<Schema>,
  out: (s: Schema, at: string[]) => void,
) {
  const s = resolve(doc, schema);
  if (!s || seen.has(s)) return;
  seen.add(s);
  const types: string[] = Array.isArray(s['type']) ? s['type'] : s['type'] ? [s['type']] : [];
  if (types.includes('integer') || types.includes('number')) out(s, at);
  for (const key of ['anyOf', 'oneOf', 'allOf'])
    for (const part of (s[key] as Schema[] | undefined) ?? []) walk(doc, part, at, seen, out);
  for (const [name, child] of Object.entries((s['properties'] as Record<string, Schema>) ?? {}))
    walk(doc, child, [...at, name], seen, out);
  if (s['items']) walk(doc, s['items'], [...at, '[]'], seen, out);
  if (s['additionalProperties'] && typeof s['additionalProperties'] === 'object')
    walk(doc, s['additionalProperties'], [...at, '*'], seen, out);
  for (const [pattern, child] of Object.entries(
    (s['patternProperties'] as Record<string, Schema>) ?? {},
  ))
    walk(doc, child, [...at, `/${pattern}/`], seen, out);
  seen.delete(s);
}

export function requestNumberFields(doc: any): NumberField[] {
  const fields: NumberField[] = [];
  for (const [path, item] of Object.entries(doc.paths as Record<string, any>)) {
    for (const [method, op] of Object.entries(item as Record<string, any>)) {
      if (!op || typeof op !== 'object' || !('responses' in op)) continue;
      const push = (where: NumberField['in'], s: Schema, pointer: string[]) => {
        const types: string[] = Array.isArray(s['type']) ? s['type'] : [s['type']];
        fields.push({
          method: method.toUpperCase(),
          path,
          in: where,
          pointer,
          type: types.includes('integer') ? 'integer' : 'number',
          minimum:
            s['minimum'] ??
            (s['exclusiveMinimum'] !== undefined ? s['exclusiveMinimum'] + 1 : undefined),
          maximum:
            s['maximum'] ??
            (s['exclusiveMaximum'] !== undefined ? s['exclusiveMaximum'] - 1 : undefined),
        });
      };
      for (const p of (op.parameters as any[]) ?? [])
        walk(doc, p.schema, [p.name], new Set(), (s, at) => push(p.in, s, at));
      const body = op.requestBody?.content?.['application/json']?.schema;
      walk(doc, body, [], new Set(), (s, at) => push('body', s, at));
    }
  }
  return fields;
}
