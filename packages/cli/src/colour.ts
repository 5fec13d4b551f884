import type { Env } from '@svc/contracts';

/** The few tones a line may carry on a terminal. */
export type Tone = 'good' | 'bad' | 'warn' | 'busy' | 'dim';

const CODES: Record<Tone, [number, number]> = {
  good: [32, 39],
  bad: [31, 39],
  warn: [33, 39],
  busy: [36, 39],
  dim: [2, 22],
};

/**
 * Colour only for a person at a terminal: never when the stream is not a TTY, never when
 * NO_COLOR is set (https://no-color.org), and always when FORCE_COLOR asks for it (except 0).
 */
export function colourWanted(stream: { isTTY?: boolean }, env: Env = process.env): boolean {
  if (env['NO_COLOR'] !== undefined && env['NO_COLOR'] !== '') return false;
  const force = env['FORCE_COLOR'];
  if (force !== undefined && force !== '') return force !== '0' && force !== 'false';
  return stream.isTTY === true;
}

export function paint(text: string, tone: Tone | undefined): string {
  if (!tone) return text;
  const [on, off] = CODES[tone];
  return `\u001b[${on}m${text}\u001b[${off}m`;
}

/** The tone of a run, command or turn state. */
export function stateTone(state: string | null | undefined): Tone | undefined {
  switch (state) {
    case 'completed':
      return 'good';
    case 'failed':
    case 'blocked':
      return 'bad';
    case 'cancelled':
      return 'warn';
    case 'running':
    case 'claimed':
    case 'pending':
      return 'busy';
    default:
      return undefined;
  }
}
