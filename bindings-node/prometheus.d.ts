import type { Registry } from 'prom-client';
import type { Client } from './index';

/**
 * Register `client`'s metric families (core's names: `etcdlock_acquire_seconds`,
 * `etcdlock_held`, ...) in `registry` (default: prom-client's global registry),
 * with `labels` on every series. Returns a function that removes them.
 */
export function register(client: Client, options?: { registry?: Registry; labels?: Record<string, string> }): () => void;
