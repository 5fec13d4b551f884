#!/usr/bin/env node
import '../dist/runs.js';
