import { BlockList, isIP } from 'node:net';

/**
 * The private boundary of p0: loopback always, plus the networks an operator lists in
 * AUTH_BROKER_TRUSTED_CIDRS (the cluster or proxy network). The socket's peer address decides;
 * forwarded-for headers are ignored because any caller can write them.
 */
export class CallerBoundary {
  readonly #trusted = new BlockList();
  readonly cidrs: readonly string[];

  constructor(cidrs: readonly Cidr[]) {
    this.#trusted.addSubnet('127.0.0.0', 8, 'ipv4');
    this.#trusted.addAddress('::1', 'ipv6');
    for (const cidr of cidrs) this.#trusted.addSubnet(cidr.address, cidr.prefix, cidr.family);
    this.cidrs = cidrs.map((c) => `${c.address}/${c.prefix}`);
  }

  allows(remoteAddress: string | undefined): boolean {
    if (!remoteAddress) return false;
    const address = unmapIpv4(remoteAddress);
    const family = isIP(address);
    if (family === 0) return false;
    return this.#trusted.check(address, family === 4 ? 'ipv4' : 'ipv6');
  }
}

export interface Cidr {
  address: string;
  prefix: number;
  family: 'ipv4' | 'ipv6';
}

/** Parse `a.b.c.d/n` or `x::y/n` (a bare address is a single host); a problem string when not. */
export function parseCidr(raw: string): Cidr | string {
  const [address = '', prefixText, extra] = raw.split('/');
  const family = isIP(address);
  if (family === 0 || extra !== undefined) return `${JSON.stringify(raw)} is not a CIDR`;
  const max = family === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? max : Number(prefixText);
  if (!/^\d{1,3}$/.test(prefixText ?? String(max)) || prefix < 0 || prefix > max)
    return `${JSON.stringify(raw)} has a prefix outside 0-${max}`;
  return { address, prefix, family: family === 4 ? 'ipv4' : 'ipv6' };
}

/** `::ffff:10.0.0.1` (IPv4 on a dual-stack socket) is checked as `10.0.0.1`. */
function unmapIpv4(address: string): string {
  const match = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return match?.[1] ?? address;
}
