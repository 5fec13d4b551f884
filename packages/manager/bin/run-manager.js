#!/usr/bin/env -S node --max-semi-space-size=8
// A small young generation keeps the manager's memory bounded under bursts (see README).
import '../dist/server.js';
