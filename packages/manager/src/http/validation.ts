import { Ajv, type Options } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifyInstance } from 'fastify';

// ajv-formats ships CommonJS; its default export is the function under ESM interop.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/**
 * Two validators: request bodies are checked strictly (no type coercion, unknown fields are
 * errors, never silently removed), while query strings and path params are text on the wire
 * and are coerced to the declared types.
 */
export function registerValidation(app: FastifyInstance): void {
  const common: Options = {
    removeAdditional: false,
    useDefaults: true,
    allErrors: false,
    strict: false,
  };
  const bodyAjv = addFormats(new Ajv({ ...common, coerceTypes: false }));
  const textAjv = addFormats(new Ajv({ ...common, coerceTypes: true }));
  app.setValidatorCompiler(({ schema, httpPart }) =>
    (httpPart === 'body' ? bodyAjv : textAjv).compile(schema),
  );
}
