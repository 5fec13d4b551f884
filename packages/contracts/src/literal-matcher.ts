/**
 * One regular expression that finds any of a set of literal strings. The literals are folded
 * into a trie first, so the engine decides on one character at a time instead of trying every
 * alternative at every position: the cost stays close to one pass over the text however many
 * values are registered.
 */
interface TrieNode {
  children: Map<string, TrieNode>;
  end: boolean;
}

export function literalMatcher(literals: Iterable<string>): RegExp | null {
  const root: TrieNode = { children: new Map(), end: false };
  let any = false;
  for (const literal of literals) {
    if (literal.length === 0) continue;
    any = true;
    let node = root;
    for (const ch of literal) {
      let next = node.children.get(ch);
      if (!next) {
        next = { children: new Map(), end: false };
        node.children.set(ch, next);
      }
      node = next;
    }
    node.end = true;
  }
  return any ? new RegExp(emit(root), 'g') : null;
}

/**
 * Alternatives are greedy and ordered so the longest literal at a position wins. Written with
 * an explicit stack of pending groups: a long literal makes a deep trie, and the emitter must
 * not recurse once per character.
 */
function emit(root: TrieNode): string {
  type Frame = { node: TrieNode; keys: string[]; index: number; parts: string[] };
  const frame = (node: TrieNode): Frame => ({
    node,
    keys: [...node.children.keys()].sort(),
    index: 0,
    parts: [],
  });
  const stack: Frame[] = [frame(root)];
  let finished = '';
  for (;;) {
    const top = stack[stack.length - 1]!;
    if (top.index < top.keys.length) {
      const key = top.keys[top.index]!;
      stack.push(frame(top.node.children.get(key)!));
      continue;
    }
    finished = group(top);
    stack.pop();
    const parent = stack[stack.length - 1];
    if (!parent) return finished;
    parent.parts.push(escape(parent.keys[parent.index]!) + finished);
    parent.index++;
  }
}

function group(f: { node: TrieNode; parts: string[] }): string {
  if (f.parts.length === 0) return '';
  const body = f.parts.length === 1 ? f.parts[0]! : `(?:${f.parts.join('|')})`;
  if (f.node.end) return f.parts.length === 1 ? `(?:${body})?` : `${body}?`;
  return body;
}

function escape(ch: string): string {
  return /[\\^$.*+?()[\]{}|/]/.test(ch) ? `\\${ch}` : ch;
}
