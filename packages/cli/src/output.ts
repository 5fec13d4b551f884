import type { Redactor } from '@svc/contracts';
import { paint, type Tone } from './colour.js';

/** Longest line a bounded (default) view prints; longer text is cut with an ellipsis. */
export const MAX_LINE = 200;

export function clip(text: string, max = MAX_LINE): string {
  const flat = text.replace(/[\r\n\t]+/g, ' ');
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/**
 * Everything either client prints goes through here: redacted by exact value (the token, a URL
 * password) and, in bounded views, one clipped line per call.
 */
export class Output {
  constructor(
    private readonly redactor: Redactor,
    readonly json: boolean,
    /** Colour human lines (a terminal, NO_COLOR unset: see colour.ts). */
    private readonly colour = false,
    private readonly stdout: NodeJS.WritableStream = process.stdout,
    private readonly stderr: NodeJS.WritableStream = process.stderr,
  ) {}

  /** One bounded human line, in a tone on a terminal (clipped before colouring). */
  line(text = '', tone?: Tone): void {
    const plain = this.redactor.redact(clip(text));
    this.stdout.write(`${this.colour ? paint(plain, tone) : plain}\n`);
  }

  /** Text printed whole (an expanded `--full` block), redacted. */
  block(text: string): void {
    this.stdout.write(`${this.redactor.redact(text)}\n`);
  }

  /** A JSON document; `compact` prints one line (a stream of events). */
  data(value: unknown, compact = false): void {
    const text = compact ? JSON.stringify(value) : JSON.stringify(value, null, 2);
    this.stdout.write(`${this.redactor.redact(text)}\n`);
  }

  error(text: string): void {
    this.stderr.write(`${this.redactor.redact(text)}\n`);
  }
}
