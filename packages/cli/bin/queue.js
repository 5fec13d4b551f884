#!/usr/bin/env node
import '../dist/queue.js';
