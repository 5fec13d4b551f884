// The console builds to plain static files (dist/) that the manager serves at `/`. Preact via
// esbuild's automatic JSX runtime: no framework plugin needed.
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { extname, join, resolve } from 'node:path';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import { defineConfig } from 'vite';

const COMPRESSIBLE = new Set(['.html', '.js', '.css', '.svg']);

/**
 * Each text file also as `.br` and `.gz` at the highest levels, once at build time; the manager
 * sends the form the browser accepts (packages/manager/src/http/console-files.ts).
 */
function precompress() {
  let outDir = 'dist';
  const walk = (dir) =>
    readdirSync(dir).flatMap((name) => {
      const path = join(dir, name);
      return statSync(path).isDirectory() ? walk(path) : [path];
    });
  return {
    name: 'svc-precompress',
    apply: 'build',
    configResolved(config) {
      outDir = resolve(config.root, config.build.outDir);
    },
    closeBundle() {
      for (const path of walk(outDir)) {
        if (!COMPRESSIBLE.has(extname(path))) continue;
        const body = readFileSync(path);
        writeFileSync(
          `${path}.br`,
          brotliCompressSync(body, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }),
        );
        writeFileSync(`${path}.gz`, gzipSync(body, { level: 9 }));
      }
    },
  };
}

export default defineConfig({
  root: import.meta.dirname,
  base: '/',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  plugins: [precompress()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // Small enough to stay one chunk; no source maps shipped to browsers.
    sourcemap: false,
    chunkSizeWarningLimit: 400,
  },
});
