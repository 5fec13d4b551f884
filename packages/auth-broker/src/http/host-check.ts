import type { IncomingMessage } from 'node:http';
import { BlockList, isIPv4, isIPv6 } from 'node:net';

/**
 * The `Host` a request names must be the broker's own: a name the operator configured
 * (AUTH_BROKER_ALLOWED_HOSTS) or a loopback literal. A page a browser loaded from an attacker's
 * name that was re-pointed at 127.0.0.1 (DNS rebinding) reaches the broker from loopback, so
 * the peer address alone cannot tell it apart; the name it was loaded from can.
 */
export class HostCheck {
  readonly #names: ReadonlySet<string>;

  constructor(names: readonly string[]) {
    this.#names = new Set(names.map((n) => n.toLowerCase()));
  }

  /** `host` is the Host header (or an absolute-form target's authority), port optional. */
  allows(host: string | undefined): boolean {
    const name = hostName(host);
    if (name === null) return false;
    return isLoopbackLiteral(name) || this.#names.has(name);
  }
}

/**
 * Every host a request names: its Host header (one, required) and the authority of an
 * absolute-form target (`GET http://name/health`), which a server must prefer over Host.
 */
export function requestHosts(raw: IncomingMessage): Array<string | undefined> {
  const hosts: Array<string | undefined> = [raw.headers.host];
  // Node keeps the first of repeated Host headers; a second one is a smuggling attempt.
  if (raw.rawHeaders.filter((_, i) => i % 2 === 0 && /^host$/i.test(raw.rawHeaders[i]!)).length > 1)
    hosts.push(undefined);
  const target = raw.url ?? '';
  if (!target.startsWith('/')) {
    const authority = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)/i.exec(target)?.[1];
    // An authority with user info, or a target that is neither a path nor absolute, names no host we serve.
    hosts.push(authority === undefined || authority.includes('@') ? undefined : authority);
  }
  return hosts;
}

/** Lower-cased host of `name`, `name:port`, `[v6]` or `[v6]:port`; null when malformed. */
function hostName(raw: string | undefined): string | null {
  if (raw === undefined || raw.length === 0 || raw.length > 255) return null;
  const match = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(raw);
  if (!match) return null;
  const port = match[2];
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65535)) return null;
  const name = match[1]!.toLowerCase();
  if (name.startsWith('[')) return isIPv6(name.slice(1, -1)) ? name : null;
  // A registered name or a dotted quad: letters, digits, dots and hyphens only.
  return /^[a-z0-9.-]+$/.test(name) ? name : null;
}

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** `localhost`, 127.0.0.0/8 as a dotted quad, and `::1` or IPv4-mapped loopback in any spelling. */
function isLoopbackLiteral(name: string): boolean {
  if (name === 'localhost') return true;
  if (isIPv4(name)) return LOOPBACK.check(name, 'ipv4');
  return name.startsWith('[') && LOOPBACK.check(name.slice(1, -1), 'ipv6');
}
