/**
 * RBAC as the API server applies it, for the fake: each request maps to a verb on a resource of
 * an API group (GET one object `get`, GET a collection `list`, `?watch=1` `watch`, POST
 * `create`, PUT `update`, PATCH `patch`, DELETE `delete`, DELETE a collection
 * `deletecollection`), and is allowed when a rule of the Role grants it.
 */
export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

/** One authorization question: `batch/jobs:watch`, `/secrets:get`. */
export interface RbacCall {
  group: string;
  resource: string;
  verb: string;
  name: string | undefined;
}

export function rbacVerb(method: string, name: string | undefined, watch: boolean): string {
  switch (method) {
    case 'GET':
      return name ? 'get' : watch ? 'watch' : 'list';
    case 'POST':
      return 'create';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      return name ? 'delete' : 'deletecollection';
    default:
      return method.toLowerCase();
  }
}

export function allowedBy(rules: readonly PolicyRule[], call: RbacCall): boolean {
  return rules.some(
    (rule) =>
      rule.apiGroups.some((g) => g === '*' || g === call.group) &&
      rule.resources.some((r) => r === '*' || r === call.resource) &&
      rule.verbs.some((v) => v === '*' || v === call.verb) &&
      // resourceNames never match a create or a collection (the name is not known then).
      (!rule.resourceNames ||
        (call.name !== undefined &&
          call.verb !== 'create' &&
          rule.resourceNames.includes(call.name))),
  );
}

/** `group/resource:verb`, the form tests compare with a Role. */
export const callKey = (call: Pick<RbacCall, 'group' | 'resource' | 'verb'>) =>
  `${call.group}/${call.resource}:${call.verb}`;
