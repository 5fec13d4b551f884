export * from './pg.js';
export * from './processes.js';
export * from './canary.js';
