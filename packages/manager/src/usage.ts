/**
 * `run-manager --help`: every variable config.ts reads (help-variables.test.ts holds it to
 * that), grouped as an operator looks for them. Defaults and details: README.md's table.
 */
export const USAGE = `
usage: run-manager [--help | --version]

The run manager: REST API, web console, scheduler and runner launcher of the agent run service.
It takes no arguments; it reads its environment once at start (a bad value stops the start,
every problem listed). Details and defaults: README.md and docs/operations.md.

Listening and store
  HOST, PORT                    where to listen (default 127.0.0.1:8080)
  DATABASE_URL                  PostgreSQL; without it an embedded store under SVC_DATA_DIR
  SVC_DB_POOL_SIZE              connections to PostgreSQL (default 10)
  SVC_DB_LEASE_POOL_SIZE        connections of lease renewals and claims (default 2)
  SVC_DATA_DIR                  embedded store, local Secrets, job dirs, sessions (./.data)
  SVC_MANAGER_PUBLIC_URL        the URL runners use (default: the address it listens on)
  SVC_BODY_LIMIT_BYTES          largest request body (default 1 MiB)
  LOG_LEVEL, LOG_FORMAT         pino level (info); pretty on a terminal, else json

Who may call
  SVC_API_KEY                   operator API keys, comma-separated (rotation: several)
  SVC_API_KEY_FILE              a file of API keys, one per line (added to SVC_API_KEY)
  SVC_DEPLOYMENT_MODE           local (default: permissive without a key) or runtime
  SVC_TENANT_ALLOWLIST          tenants a run may name (tenant-a,tenant-b)

Execution policy (ceiling, then defaults)
  SVC_POLICY_MAX_SANDBOX, SVC_POLICY_MAX_APPROVAL, SVC_POLICY_MAX_NETWORK,
  SVC_POLICY_MAX_TIMEOUT_MS, SVC_POLICY_ALLOWED_TOOLS
  SVC_POLICY_DEFAULT_SANDBOX, SVC_POLICY_DEFAULT_APPROVAL, SVC_POLICY_DEFAULT_NETWORK,
  SVC_POLICY_DEFAULT_TIMEOUT_MS
  SVC_REPO_URL_ALLOW_PREFIXES   URL prefixes (a local mirror) a repository address may use

Runners and their Jobs
  SVC_LAUNCHER                  local (child processes) or kubernetes (batch/v1 Jobs)
  SVC_NAMESPACE                 Kubernetes namespace (svc-v01)
  SVC_RUNNER_ENTRY              local launcher: the runner script to start
  SVC_RUNNER_KILL_GRACE_MS      local launcher: SIGTERM to SIGKILL
  SVC_LOCAL_ISOLATION           local launcher: on (default: each runner Job in a bubblewrap
                                sandbox; without bwrap, Debian package bubblewrap, Jobs are
                                refused) or off
  SVC_BWRAP_PATH                the bwrap binary (default: the first bwrap on PATH)
  SVC_LOCAL_RUNNER_UID, SVC_LOCAL_RUNNER_GID   the sandboxed runner's ids when the manager
                                runs as root (65532)
  SVC_RUNNER_IMAGE, SVC_RUNNER_IMAGE_ALLOWLIST, SVC_IMAGE_CATALOG   runner images
  SVC_RUNNER_TOOLS, SVC_REQUIRED_TOOLS   tools the image has; tools a runner insists on
  SVC_JOB_TTL_SECONDS           finished Jobs are kept this long
  SVC_PLATFORM_DEFAULTS         NAME=value,... non-secret defaults for runs
  SVC_RUNNER_IDLE_EXIT_MS       a runner closes its run after this long without work
  SVC_LEASE_TTL_MS, SVC_HEARTBEAT_INTERVAL_MS, SVC_POLL_WAIT_MAX_MS   leases and polls
  SVC_COMMAND_TTL_MS            an undelivered command expires
  SVC_REPLACEMENT_MAX, SVC_REPLACEMENT_BACKOFF_MS   replacing a runner that died
  SVC_RUNNER_CPU_REQUEST, SVC_RUNNER_CPU_LIMIT, SVC_RUNNER_MEMORY_REQUEST,
  SVC_RUNNER_MEMORY_LIMIT, SVC_RUNNER_EPHEMERAL_STORAGE_REQUEST,
  SVC_RUNNER_EPHEMERAL_STORAGE_LIMIT, SVC_RUNNER_JOB_DEADLINE_FACTOR   runner pods
  SVC_KUBE_API_URL              an explicit API server (else KUBECONFIG or in-cluster)
  SVC_KUBE_POLL_INTERVAL_MS, SVC_KUBE_RESYNC_INTERVAL_MS, SVC_KUBE_REQUEST_TIMEOUT_MS,
  SVC_KUBE_RETRIES              the Kubernetes API edge
  SVC_SECRET_STORE              local or kubernetes: where profile and tool Secrets live
  SVC_MASK_REFRESH_MS           how often Secrets are read again into the log masks

Scheduler
  SVC_SCHEDULER                 on (default) or off
  SVC_SCHEDULER_MAX_RUNNING     live runners at most (20)
  SVC_SCHEDULER_TENANT_MAX_RUNNING, SVC_SCHEDULER_TENANT_LIMITS,
  SVC_SCHEDULER_PROFILE_MAX_RUNNING, SVC_SCHEDULER_PROFILE_LIMITS,
  SVC_SCHEDULER_QUEUE_MAX_RUNNING, SVC_SCHEDULER_QUEUE_LIMITS   limits per name (name=n,...)
  SVC_SCHEDULER_BATCH, SVC_SCHEDULER_SCAN_MS, SVC_SCHEDULER_LAUNCH_CONCURRENCY
  SVC_RETRY_BACKOFF_MS, SVC_RETRY_MAX_BACKOFF_MS   retries of failed attempts

Sessions and profiles
  SVC_SESSION_TTL_SECONDS, SVC_SESSION_GC_INTERVAL_MS, SVC_AGENT_ROLLOUT_SUBDIR,
  SVC_SESSION_STORAGE_CLASS, SVC_SESSION_STORAGE_SIZE   session storage
  SVC_BRIDGE_BASE_URL, SVC_FLASH_MODEL_ID   builtin-b / builtin-d profile rules
  SVC_VALIDATION_TENANT, SVC_VALIDATION_PROJECT, SVC_VALIDATION_TIMEOUT_MS   canary runs

Overload (docs/operations.md, "Overload")
  SVC_ADMISSION                 on (default) or off
  SVC_ADMISSION_QUEUE_MS        queue-time budget of runner and client calls (100 ms); a call
                                that would wait longer is answered 503 overloaded, Retry-After
  SVC_ADMISSION_RUNNER_PLACES, SVC_ADMISSION_CLIENT_PLACES   calls in progress (128, 64)
  SVC_WRITE_GROUPS              coalesced appends and renewals in flight, the appends on
                                as many connections of their own (4; 0: off)

Clients, streams and upkeep
  SVC_CLIENT_WAIT_MAX_MS        the longest client long-poll
  SVC_MAX_WATCHES               client long-polls and event streams open at once (200;
                                one more is answered 429 with Retry-After)
  SVC_STREAM_HEARTBEAT_MS, SVC_STREAM_MAX_MS   event streams (SSE)
  SVC_RESULT_EVENT_CAP          events aggregated per result envelope
  SVC_MAINTENANCE_INTERVAL_MS   command expiry and counters
  SVC_METRICS_COUNTS_MAX_AGE_MS how stale /metrics counts may be
  SVC_DRAIN_DELAY_MS, SVC_DRAIN_TIMEOUT_MS   SIGTERM: unready first, then drain
  SVC_SERVICE_ID, SVC_VERSION, SVC_SOURCE_COMMIT, SVC_BUILD_TIME   what /health reports

Exit codes: 0 stopped cleanly · 1 a failure · 2 bad configuration · 3 a migration failed ·
4 the data directory is in use by another manager · 5 HOST:PORT is already in use.`;
