import { Worker } from 'node:worker_threads';
import { JOB_DIR, liveRunnerJobs, TEST_TAG_VAR } from './processes.js';

export interface RunnerSample {
  /** The most runner Jobs that had a live process at one sampled moment. */
  peak: number;
  samples: number;
  /** Every runner Job seen alive. */
  seen: Set<string>;
}

/**
 * Samples /proc for live runner Jobs (see `liveRunnerJobs`) every `everyMs`, in a worker
 * thread: a test whose own event loop runs the manager, and waits on it, still samples at
 * the pace asked.
 */
export function sampleRunnerJobs(tag: string, everyMs = 10): { stop(): Promise<RunnerSample> } {
  // The same function the tests call, carried into the worker as source.
  const source = `
    const { parentPort, workerData } = require('node:worker_threads');
    const { readdirSync, readFileSync } = require('node:fs');
    const TEST_TAG_VAR = ${JSON.stringify(TEST_TAG_VAR)};
    const JOB_DIR = ${JOB_DIR.toString()};
    const liveRunnerJobs = ${liveRunnerJobs.toString()};
    let peak = 0, samples = 0;
    const seen = new Set();
    const timer = setInterval(() => {
      const jobs = liveRunnerJobs(workerData.tag);
      samples++;
      peak = Math.max(peak, jobs.size);
      for (const name of jobs.keys()) seen.add(name);
    }, workerData.everyMs);
    parentPort.once('message', () => {
      clearInterval(timer);
      parentPort.postMessage({ peak, samples, seen: [...seen] });
    });`;
  const worker = new Worker(source, { eval: true, workerData: { tag, everyMs } });
  return {
    async stop() {
      const result = new Promise<{ peak: number; samples: number; seen: string[] }>(
        (resolve, reject) => {
          worker.once('message', resolve);
          worker.once('error', reject);
        },
      );
      worker.postMessage('stop');
      const { peak, samples, seen } = await result;
      await worker.terminate();
      return { peak, samples, seen: new Set(seen) };
    },
  };
}
