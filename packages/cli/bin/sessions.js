#!/usr/bin/env node
import '../dist/sessions.js';
