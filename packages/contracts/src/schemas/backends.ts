import { Type, type Static } from '@sinclair/typebox';

export const Backend = Type.Object({
  backendKind: Type.String(),
  protocol: Type.String(),
  transport: Type.String(),
  profiles: Type.Array(
    Type.Object({ profile: Type.String(), builtin: Type.Boolean(), configured: Type.Boolean() }),
  ),
  commandTypes: Type.Array(Type.String()),
  capabilities: Type.Array(Type.String()),
  executionPolicyCeiling: Type.Record(Type.String(), Type.Unknown()),
});
export const BackendsResponse = Type.Object({ backends: Type.Array(Backend) });
export type BackendsResponse = Static<typeof BackendsResponse>;
