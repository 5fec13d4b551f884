export { startTestManager, type TestManager } from '../test/helpers.js';

/** A valid task body for the scheduler benchmark. */
export const taskBodyFor = (i: number): Record<string, unknown> => ({
  tenantId: 'tenant-a',
  projectId: 'proj-1',
  queue: 'bench',
  title: `bench task ${i}`,
  payload: { prompt: `bench ${i}` },
});
