import { queueProgram } from './queue-commands.js';

process.exitCode = await queueProgram().run(process.argv.slice(2));
