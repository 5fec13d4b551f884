import { runsProgram } from './runs-commands.js';

process.exitCode = await runsProgram().run(process.argv.slice(2));
