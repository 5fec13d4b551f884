/** The command-line clients of the manager's REST API: `queue`, `sessions` and `runs`. */
export { queueProgram } from './queue-commands.js';
export { sessionsProgram } from './sessions-commands.js';
export { runsProgram } from './runs-commands.js';
export { loadCliConfig, DEFAULT_MANAGER_URL, type CliConfig } from './config.js';
export { EXIT } from './errors.js';
