export * from './pg.js';
export * from './processes.js';
export * from './runner-sampler.js';
export * from './canary.js';
export * from './ports.js';
export * from './fake-provider.js';
export * from './fake-kube.js';
