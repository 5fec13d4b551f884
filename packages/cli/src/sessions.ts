import { sessionsProgram } from './sessions-commands.js';

process.exitCode = await sessionsProgram().run(process.argv.slice(2));
