// Replies are the agent's Markdown: rendered to HTML, then sanitized, so neither raw HTML in a
// reply nor a crafted link can run script in the console.
import DOMPurify from 'dompurify';
import { Marked } from 'marked';

const marked = new Marked({ gfm: true, breaks: false, async: false });

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  // Links open outside the console and carry no referrer; images may only be inline data.
  if (node.tagName === 'A') {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
  if (node.tagName === 'IMG') {
    const src = node.getAttribute('src') ?? '';
    if (!src.startsWith('data:image/')) {
      node.removeAttribute('src');
      node.setAttribute('data-blocked', src.slice(0, 200));
    }
  }
});

export function renderMarkdown(text: string): string {
  const html = marked.parse(text) as string;
  const fragment = DOMPurify.sanitize(html, {
    USE_PROFILES: { html: true },
    FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe'],
    FORBID_ATTR: ['style'],
    RETURN_DOM_FRAGMENT: true,
  });
  // A remote image is never fetched (no request leaves the machine): show what it was.
  for (const img of fragment.querySelectorAll('img[data-blocked]')) {
    const note = document.createElement('span');
    note.className = 'blocked-image';
    note.textContent = `[image not loaded: ${img.getAttribute('alt') || 'untitled'}]`;
    note.title = img.getAttribute('data-blocked') ?? '';
    img.replaceWith(note);
  }
  const holder = document.createElement('div');
  holder.append(fragment);
  return holder.innerHTML;
}
