/**
 * Auth broker: a private service that performs an allowlisted set of code-host (GitHub REST)
 * operations with a credential it holds, and the product feature-configuration module.
 *
 * Glossary
 * - operation: one allowlisted action (`codehost.issue.read`, `codehost.pr.create` as dry run…).
 * - credential reference: `file:<path>` or `env:<NAME>`; the broker prints only its redacted form.
 * - planned request: the mutation the broker would send, returned instead of sending it (p0).
 * - failure kind: the stable name of a failure, with HTTP status, runner disposition and retry hint.
 * - runner disposition: `ready`, `infra-blocked` or `business-failed`.
 * - caller boundary: loopback plus AUTH_BROKER_TRUSTED_CIDRS; everyone else is refused.
 */
export { loadConfig, DEFAULT_CODEHOST_API_URL, type BrokerConfig } from './config.js';
export { startBroker, type RunningBroker, type StartOptions } from './server.js';
export { BODY_LIMIT_BYTES } from './app.js';
export {
  BROKER_FAILURE_KINDS,
  BROKER_FAILURE_KIND_NAMES,
  BrokerError,
  failureEnvelope,
  isBrokerError,
  isBrokerFailureKind,
  type BrokerFailureKind,
  type FailureEnvelope,
  type FailureKindSpec,
  type RunnerDisposition,
} from './errors.js';
export {
  OPERATIONS,
  OPERATION_NAMES,
  CAPABILITIES,
  type OperationName,
} from './domain/operations.js';
export type { AuditRecord, CallerPlane } from './audit.js';
export { ISSUE_FIELDS, PR_FIELDS } from './codehost/shapes.js';
export {
  FEATURE_CONFIG_SCHEMA_URL,
  FeatureConfigError,
  loadFeatureConfig,
  MIN_PROBE_INTERVAL_SECONDS,
  type FeatureConfig,
  type WebProbeSentinelConfig,
} from './features/feature-config.js';
export {
  WebProbeSentinel,
  type ProbeErrorKind,
  type ProbeResult,
  type SentinelScheduler,
  type WebProbeSentinelOptions,
} from './features/web-probe-sentinel.js';
