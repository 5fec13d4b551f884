import { readdir, readFile, readlink } from 'node:fs/promises';
import type { Socket } from 'node:net';
import type { ManagerConfig } from '../config.js';

/**
 * Whether calls need telling apart: no API key (every keyless call is an operator's) and
 * runner Jobs in local sandboxes on this host. Unsandboxed local runners (isolation off) are
 * the manager's own user, as the operator's shell is: nothing tells them apart (security.md).
 */
export const permissiveWithSandboxes = (config: ManagerConfig): boolean =>
  config.apiKeys.length === 0 &&
  config.deploymentMode === 'local' &&
  config.launcher.kind === 'local' &&
  config.launcher.isolation.mode === 'on';

/**
 * Whether a connection was opened from inside a local runner sandbox. A sandbox
 * shares the host's network (its runner and agent must reach the manager and the model
 * provider), so without an API key the manager's API on loopback would be open to any code the
 * agent runs there: it could start runs of other profiles and read what they print. Such a
 * caller is told apart by where its socket lives: the process holding the connection's other
 * end (found through the socket's inode in /proc/net/tcp) is in another PID namespace than the
 * manager's, and every sandbox has one of its own. Looked up once per connection.
 */
export class SandboxPeers {
  #ownNamespace: Promise<string | null> = readlink('/proc/self/ns/pid').catch(() => null);
  #seen = new WeakMap<Socket, Promise<boolean>>();

  isSandboxed(socket: Socket): Promise<boolean> {
    let known = this.#seen.get(socket);
    if (!known) {
      known = this.#lookUp(socket).catch(() => false);
      this.#seen.set(socket, known);
    }
    return known;
  }

  async #lookUp(socket: Socket): Promise<boolean> {
    const own = await this.#ownNamespace;
    const { remoteAddress, remotePort, localPort } = socket;
    // Any address: a sandbox shares the host's network, so it may also come in through one
    // of the host's other addresses when the manager listens on them.
    if (!own || !remoteAddress || !remotePort || !localPort) return false;
    // The processes of other PID namespaces first: with no sandbox alive there are none, and
    // the socket tables (one row per connection of the host) are not read at all.
    const foreign: string[] = [];
    for (const pid of await readdir('/proc')) {
      if (!/^\d+$/.test(pid)) continue;
      const namespace: string = await readlink(`/proc/${pid}/ns/pid`).catch(() => own);
      if (namespace !== own) foreign.push(pid);
    }
    if (foreign.length === 0) return false;
    const inode = await socketInode(remotePort, localPort);
    if (!inode) return false;
    const target = `socket:[${inode}]`;
    for (const pid of foreign) {
      const fds = await readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
      for (const fd of fds)
        if ((await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '')) === target) return true;
    }
    return false;
  }
}

/**
 * The inode of the client's end of a TCP connection from this host: the row of /proc/net/tcp
 * (or tcp6) whose local port is the connection's remote port and whose remote port is ours.
 * A client on another host has no such row.
 */
async function socketInode(clientPort: number, serverPort: number): Promise<string | null> {
  const local = `:${hexPort(clientPort)}`;
  const remote = `:${hexPort(serverPort)}`;
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const text = await readFile(table, 'latin1').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      // sl local_address rem_address st tx:rx tr:tm retrnsmt uid timeout inode
      if (fields[1]?.endsWith(local) && fields[2]?.endsWith(remote) && fields[9] !== '0')
        return fields[9] ?? null;
    }
  }
  return null;
}

const hexPort = (port: number) => port.toString(16).toUpperCase().padStart(4, '0');
