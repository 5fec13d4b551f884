// Where the built console lives, for the manager to serve. The package holds only static
// files: the manager needs this path, never the console's code.
import { fileURLToPath } from 'node:url';

export const consoleDir = fileURLToPath(new URL('./dist/', import.meta.url));
