/**
 * `npm run fake-provider`: the tests' scripted model provider (packages/testkit) on loopback, so
 * the README's walkthrough and the console can be tried without a provider key. No model is
 * called: every reply is written below. It prints the two values the walkthrough asks for.
 *
 * A prompt is answered with a short Markdown reply that quotes it; a prompt that starts with
 * `$ ` is run as a shell command by the agent first (a tool call), then answered.
 */
import { FakeProvider, type ProviderStep, type RecordedRequest } from '@svc/testkit';

const USAGE = `usage: npm run fake-provider

A scripted model provider on 127.0.0.1 for trying the walkthrough and the console without a
key. Environment: FAKE_PROVIDER_PORT (default 8090; a free port when it is taken).`;

const KEY = 'sk-fake-provider-key';
const DEFAULT_PORT = 8090;

if (process.argv.includes('--help') || process.argv.includes('-h')) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}

interface InputItem {
  type?: string;
  role?: string;
  content?: { text?: unknown }[];
}

/** The newest thing the user typed (the agent adds context messages in angle brackets). */
function lastPrompt(request: RecordedRequest): string {
  const body = request.body as { input?: InputItem[] } | null;
  const texts = (body?.input ?? [])
    .filter((item) => item.role === 'user')
    .flatMap((item) => (item.content ?? []).map((part) => part.text))
    .filter((text): text is string => typeof text === 'string' && !text.startsWith('<'));
  return texts.at(-1)?.trim() ?? '';
}

const afterToolCall = (request: RecordedRequest) =>
  ((request.body as { input?: InputItem[] } | null)?.input ?? []).at(-1)?.type ===
  'function_call_output';

function reply(request: RecordedRequest): ProviderStep {
  const prompt = lastPrompt(request);
  if (afterToolCall(request))
    return { kind: 'text', text: 'The command ran; its output is in the tool call above.' };
  if (prompt.startsWith('$ ')) return { kind: 'tool-call', command: prompt.slice(2) };
  const quoted = prompt.length > 300 ? `${prompt.slice(0, 300)}…` : prompt;
  const text = [
    '**Scripted reply** from `npm run fake-provider`: no model was called.',
    '',
    `You asked: ${quoted.replaceAll('\n', ' ')}`,
    '',
    '| What | Value |',
    '| --- | --- |',
    `| prompt length | ${prompt.length} characters |`,
    `| request | #${request.index} |`,
    '',
    'Point a profile at a real provider for real answers; start a prompt with `$ ` to see a tool call.',
  ].join('\n');
  // Streamed in parts, a little apart, so the console shows the text as it arrives.
  return { kind: 'text', text, deltas: 8, frameDelayMs: 60 };
}

async function start(): Promise<FakeProvider> {
  const wanted = Number(process.env['FAKE_PROVIDER_PORT'] ?? DEFAULT_PORT);
  const options = { fallback: reply, keepRequests: 100 };
  try {
    return await FakeProvider.start({ ...options, port: wanted });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
    process.stderr.write(`port ${wanted} is taken; using a free port instead\n`);
    return FakeProvider.start(options);
  }
}

const provider = await start();
process.stdout.write(
  [
    `Scripted model provider on ${provider.baseUrl} (no model is called; any key works).`,
    'Paste these two lines into the shell of the README walkthrough:',
    '',
    `PROVIDER_URL=${provider.baseUrl}`,
    `PROVIDER_KEY=${KEY}`,
    '',
    'Ctrl+C stops it.',
    '',
  ].join('\n'),
);
const stop = () => void provider.close().then(() => process.exit(0));
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
