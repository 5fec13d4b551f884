import { splitBytes, utf8Bytes } from './bounded.js';

/**
 * Assistant text of one turn, as events the result envelope can trust:
 * - deltas are coalesced: at most one progress event per interval, carrying the accumulated
 *   text with `final: false` (a burst faster than the interval yields none). Progress events
 *   name their message `streamItemId`, not `itemId`, so they never mix into the parts of the
 *   completed message the manager joins by `itemId`;
 * - a completed message is held until the next item starts or the turn ends, so the turn's
 *   last message can be emitted once, with `final: true, replyAuthority: true`, and only when
 *   the agent says the turn completed;
 * - text over the part size is split into parts sharing the `itemId` (`part` 1-based,
 *   `parts`), at most `maxParts` (then `textTruncated`).
 */

export interface AssistantLimits {
  progressIntervalMs: number;
  partBytes: number;
  maxParts: number;
}

export const ASSISTANT_LIMITS: AssistantLimits = {
  progressIntervalMs: 250,
  partBytes: 60 * 1024,
  maxParts: 16,
};

export type AssistantEventData = Record<string, unknown> & { text: string };

interface Streaming {
  itemId: string;
  text: string;
  windowStart: number;
  emitted: number;
}

interface Held {
  itemId: string;
  text: string;
  phase: string | null;
}

export class AssistantMessages {
  #streaming: Streaming | null = null;
  #held: Held | null = null;
  #last: Held | null = null;

  constructor(
    private readonly turnId: () => string | null,
    private readonly limits: AssistantLimits = ASSISTANT_LIMITS,
  ) {}

  /** A text delta; returns a progress event's data when one is due. */
  delta(itemId: string, delta: string, now: number): AssistantEventData | null {
    if (this.#streaming?.itemId !== itemId) {
      this.#streaming = { itemId, text: '', windowStart: now, emitted: 0 };
    }
    const s = this.#streaming;
    // Past one part there is nothing more a progress event can usefully carry.
    if (utf8Bytes(s.text) > this.limits.partBytes) return null;
    s.text += delta;
    if (now - s.windowStart < this.limits.progressIntervalMs) return null;
    s.windowStart = now;
    s.emitted++;
    const [text] = splitBytes(s.text, this.limits.partBytes, 1).parts;
    return {
      streamItemId: itemId,
      turnId: this.turnId(),
      text: text ?? '',
      final: false,
      replyAuthority: false,
      progress: true,
      textBytes: utf8Bytes(s.text),
    };
  }

  /** A completed agent message; returns the previously held one (now known not last). */
  completed(itemId: string, text: string, phase: string | null): AssistantEventData[] {
    const flushed = this.flushHeld();
    if (this.#streaming?.itemId === itemId) this.#streaming = null;
    this.#held = { itemId, text, phase };
    this.#last = this.#held;
    return flushed;
  }

  /** Another item started: a held message is no longer the last one. */
  flushHeld(): AssistantEventData[] {
    const held = this.#held;
    this.#held = null;
    return held ? this.#parts(held, false) : [];
  }

  /** The turn ended: the held message is final and authoritative only when it completed. */
  finish(completed: boolean): AssistantEventData[] {
    const held = this.#held;
    this.#held = null;
    return held ? this.#parts(held, completed) : [];
  }

  /** The last completed message of the turn (for the outcome), if any. */
  get lastMessage(): { itemId: string; text: string } | null {
    return this.#last ? { itemId: this.#last.itemId, text: this.#last.text } : null;
  }

  #parts(message: Held, final: boolean): AssistantEventData[] {
    const { parts, originalBytes, truncated } = splitBytes(
      message.text,
      this.limits.partBytes,
      this.limits.maxParts,
    );
    return parts.map((text, index) => ({
      itemId: message.itemId,
      turnId: this.turnId(),
      text,
      final,
      replyAuthority: final,
      ...(message.phase !== null && { phase: message.phase }),
      textBytes: originalBytes,
      ...(parts.length > 1 && { part: index + 1, parts: parts.length }),
      ...(truncated && { textTruncated: true }),
    }));
  }
}
