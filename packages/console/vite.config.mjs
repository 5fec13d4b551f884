// The console builds to plain static files (dist/) that the manager serves at `/`. Preact via
// esbuild's automatic JSX runtime: no framework plugin needed.
import { defineConfig } from 'vite';

export default defineConfig({
  root: import.meta.dirname,
  base: '/',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // Small enough to stay one chunk; no source maps shipped to browsers.
    sourcemap: false,
    chunkSizeWarningLimit: 400,
  },
});
