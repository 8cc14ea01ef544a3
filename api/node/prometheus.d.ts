import type { Registry } from 'prom-client';
import type { Client } from './index';
export function register(client: Client, options?: { registry?: Registry; labels?: Record<string, string> }): () => void;
