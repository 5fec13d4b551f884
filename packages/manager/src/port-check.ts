import { createServer } from 'node:net';

/** HOST:PORT is taken (another manager, or anything else): said before any slow start-up work. */
export class PortInUseError extends Error {
  constructor(
    readonly host: string,
    readonly port: number,
    readonly code: string,
  ) {
    super(
      code === 'EACCES'
        ? `${host}:${port} may not be used by this user (ports below 1024 need privileges); set PORT to another port, e.g. PORT=8081`
        : `${host}:${port} is already in use (another run manager?); stop it, or set PORT to another port, e.g. PORT=${port === 65535 ? 8081 : port + 1} npm start`,
    );
    this.name = 'PortInUseError';
  }
}

/**
 * Bind HOST:PORT once and let go, before the store opens and migrations run (a minute on a
 * cold embedded store): a taken port fails at once. Port 0 (any free port) needs no check.
 */
export async function assertPortFree(host: string, port: number): Promise<void> {
  if (port === 0) return;
  const probe = createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EADDRINUSE' || error.code === 'EACCES')
        reject(new PortInUseError(host, port, error.code));
      // Anything else (an address not on this machine) is for the real listen to report.
      else resolve();
    });
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve()));
  });
}
